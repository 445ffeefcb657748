"""`StrParser`: the base output format, plain text in and plain text out.

Every output format (parser) has three methods:

* `format_instruction()`: the text that tells the model how to answer, put in the prompt;
* `parse_response(text)`: the model's reply turned into the value stored in
  `AgentMessage.formatted`;
* `format_response(parsed)`: the inverse, used to write a parsed reply back into the
  history sent to the model.

Subclasses change how field values are rendered into the instruction
(`format_to_string`) and how replies are parsed.
"""

from __future__ import annotations

from ...exceptions import UserError
from ..prompt_template import format_placeholders

__all__ = ["StrParser"]


class StrParser:
    """Plain-text output format: the instruction is a template, the reply is kept as text.

    Args:
        template: The instruction, with ``{field}`` placeholders (``str.format`` syntax;
            write literal braces as ``{{`` and ``}}``).
        **format_field: A value for every placeholder of `template`; each is rendered with
            `format_to_string` when the instruction is built. Extra fields are allowed.

    Raises:
        UserError: A placeholder of `template` has no value in `format_field`.

    Example:
        ```python
        parser = StrParser('Answer in {language}, in at most {limit} words.', language='French', limit='50')
        parser.format_instruction()  # 'Answer in French, in at most 50 words.'
        parser.parse_response('Bonjour')  # 'Bonjour'
        ```
    """

    def __init__(self, template: str = "", **format_field: object) -> None:
        if not isinstance(template, str):
            raise UserError(f"{type(self).__name__}: template must be a str, not {type(template).__name__}")
        missing = [name for name in format_placeholders(template) if name not in format_field]
        if missing:
            raise UserError(
                f"{type(self).__name__}: the template uses field(s) {missing} but no value was given; "
                "pass them as keyword arguments"
            )
        self.template = template
        self.format_field: dict[str, object] = dict(format_field)

    def format_instruction(self) -> str | list[dict[str, str]]:
        """The template with every field rendered by `format_to_string` (``''`` for no template).

        Subclasses may return system messages instead (`MixedToolParser`).
        """
        return self._instruction_text()

    def _instruction_text(self) -> str:
        if not self.template:
            return ""
        rendered = {name: self.format_to_string(value) for name, value in self.format_field.items()}
        return self.template.format(**rendered)

    def format_to_string(self, value: object) -> str:
        """Render one field value for the instruction: strings as they are, anything else with `str`."""
        return value if isinstance(value, str) else str(value)

    def parse_response(self, data: str) -> object:
        """Return the reply unchanged."""
        return data

    def format_response(self, parsed: object) -> str:
        """Write a parsed reply back as text (the inverse of `parse_response`).

        Raises:
            UserError: `parsed` is not a string.
        """
        if not isinstance(parsed, str):
            raise UserError(f"{type(self).__name__}.format_response expects a str, not {type(parsed).__name__}")
        return parsed

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in self.format_field.items())
        template = self.template if len(self.template) <= 40 else self.template[:37] + "..."
        return f"{type(self).__name__}(template={template!r}{', ' if fields else ''}{fields})"
