"""`PromptTemplate`: a prompt with named placeholders, rendered by `str.format` or Jinja.

The template checks the variables it is given against the placeholders it holds, so a
typo in a keyword or a forgotten value fails loudly instead of producing a broken prompt.
It keeps no per-call state: one instance may be rendered from many threads or sessions.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING, Literal

from ..exceptions import MissingDependencyError, UserError

if TYPE_CHECKING:
    import jinja2

__all__ = ["PromptTemplate", "format_placeholders"]

FormatType = Literal["json", "jinja"]


def format_placeholders(template: str) -> list[str]:
    """The names of the `str.format` placeholders in `template`, in order of first use.

    ``{a.b}`` and ``{a[0]}`` both count as the name ``a``; escaped braces (``{{``) are skipped.

    Raises:
        UserError: The template is not a valid format string, or uses positional
            placeholders (``{}`` or ``{0}``), which cannot be filled by keyword.
    """
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise UserError(f"invalid template ({exc}); write literal braces as '{{{{' and '}}}}': {template!r}") from None
    names: list[str] = []
    for _, field, spec, _ in parsed:
        if field is None:
            continue
        root = field.split(".", 1)[0].split("[", 1)[0]
        if not root or root.isdigit():
            raise UserError(
                f"positional placeholder {{{field}}} in template; use named placeholders such as {{name}}, "
                "or write literal braces as '{{' and '}}'"
            )
        if root not in names:
            names.append(root)
        # A format spec may itself hold placeholders: '{value:{width}}'.
        if spec and "{" in spec:
            names.extend(name for name in format_placeholders(spec) if name not in names)
    return names


class PromptTemplate:
    r"""A prompt template with named placeholders.

    Args:
        template: The template text.
        format_type: ``'json'`` renders with Python `str.format` (``{name}``; write literal
            braces as ``{{`` and ``}}``, e.g. for JSON examples). ``'jinja'`` renders with
            Jinja2 (``{{ name }}``, loops, conditionals) and needs the ``jinja`` extra.

    Raises:
        UserError: `format_type` is unknown or the template does not parse.
        MissingDependencyError: ``'jinja'`` was asked for and jinja2 is not installed.

    Example:
        ```python
        tpl = PromptTemplate('You can use these tools:\n{tools}\nAnswer in {language}.')
        tpl.placeholders  # ['tools', 'language']
        prompt = tpl.format(tools='search, calculator', language='English')

        jinja = PromptTemplate('{% for t in tools %}- {{ t }}\n{% endfor %}', format_type='jinja')
        jinja.format(tools=['search', 'calculator'])  # '- search\n- calculator\n'
        ```
    """

    def __init__(self, template: str, format_type: FormatType = "json") -> None:
        if not isinstance(template, str):
            raise UserError(f"template must be a str, not {type(template).__name__}")
        if format_type not in ("json", "jinja"):
            raise UserError(f"format_type must be 'json' (str.format) or 'jinja', not {format_type!r}")
        self.template = template
        self.format_type: FormatType = format_type
        self._jinja: jinja2.Template | None = None
        if format_type == "jinja":
            self._jinja, names = _compile_jinja(template)
        else:
            names = format_placeholders(template)
        self._placeholders: tuple[str, ...] = tuple(names)

    @property
    def placeholders(self) -> list[str]:
        """The variable names the template needs (sorted for Jinja, in order of use for str.format)."""
        return list(self._placeholders)

    def format(self, **variables: object) -> str:
        """Render the template.

        Args:
            **variables: One value per placeholder, no more, no less.

        Raises:
            UserError: A variable the template does not use was passed, a placeholder got
                no value, or rendering failed (e.g. ``{user.name}`` on a value without ``name``).
        """
        self._check(variables)
        if self._jinja is not None:
            return self._render_jinja(self._jinja, variables)
        try:
            return self.template.format(**variables)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise UserError(f"cannot render template: {type(exc).__name__}: {exc}") from exc

    def _check(self, variables: dict[str, object]) -> None:
        unknown = sorted(set(variables) - set(self._placeholders))
        missing = [name for name in self._placeholders if name not in variables]
        problems = []
        if unknown:
            problems.append(f"unknown variable(s) {unknown} (the template's placeholders are {self.placeholders})")
        if missing:
            problems.append(f"missing value(s) for placeholder(s) {missing}")
        if problems:
            raise UserError("PromptTemplate.format: " + "; ".join(problems))

    @staticmethod
    def _render_jinja(compiled: jinja2.Template, variables: dict[str, object]) -> str:
        import jinja2

        try:
            return compiled.render(**variables)
        except jinja2.TemplateError as exc:
            raise UserError(f"cannot render template: {type(exc).__name__}: {exc}") from exc

    def __repr__(self) -> str:
        text = self.template if len(self.template) <= 60 else self.template[:57] + "..."
        return f"PromptTemplate({text!r}, format_type={self.format_type!r})"


def _compile_jinja(template: str) -> tuple[jinja2.Template, list[str]]:
    try:
        import jinja2
        import jinja2.meta
    except ImportError:
        raise MissingDependencyError(
            package="jinja2", extra="jinja", feature="PromptTemplate(format_type='jinja')"
        ) from None
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    try:
        names = sorted(jinja2.meta.find_undeclared_variables(env.parse(template)))
        compiled = env.from_string(template)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"invalid Jinja template (line {exc.lineno}): {exc.message}") from None
    return compiled, names
