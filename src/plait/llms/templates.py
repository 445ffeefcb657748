r"""Meta templates: how a model wants a conversation laid out.

A meta template is a list of role entries::

    {'role': 'user', 'begin': '<|im_start|>user\n', 'end': '<|im_end|>\n'}

* ``begin`` is a str, or ``{'with_name': '...{name}...', 'without_name': '...',
  'name': {alias: token}}`` to render a message's ``name`` (mapped through ``name``).
* ``end`` closes the message.
* ``generate: True`` marks the role the model writes in (default: ``assistant``); a last
  message in that role is left open so the model continues it.
* ``fallback_role``: render this role as another one.
* ``api_role``: the role sent to a chat API (`APITemplateParser`).

`LMTemplateParser` renders messages into one prompt string for raw-completion models;
`APITemplateParser` maps them onto a chat API's roles.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Mapping, Sequence
from typing import TypeAlias, Union

from typing_extensions import Required, TypedDict

from ..exceptions import UserError

__all__ = [
    "APITemplateParser",
    "LMTemplateParser",
    "MetaTemplate",
    "RoleBegin",
    "RoleConfig",
    "RoleSpec",
    "TemplateParserClass",
    "api_meta",
]


class RoleBegin(TypedDict, total=False):
    """A ``begin`` that depends on the message's ``name`` (see the module docstring)."""

    with_name: str
    without_name: str
    name: dict[str, str]


class RoleSpec(TypedDict, total=False):
    """One entry of a meta template, with the keys the parsers read."""

    role: Required[str]
    begin: str | RoleBegin
    end: str
    generate: bool
    fallback_role: str
    api_role: str


RoleConfig: TypeAlias = Mapping[str, object]
"""One entry of a meta template as the parsers accept it (a `RoleSpec`, or any dict of that shape)."""

MetaTemplate: TypeAlias = Sequence[RoleConfig]
"""A meta template: one `RoleConfig` per role."""

Dialog: TypeAlias = Union[str, Sequence[Union[str, Mapping[str, object]]]]


def _index_roles(meta_template: MetaTemplate | None) -> dict[str, dict[str, object]]:
    roles: dict[str, dict[str, object]] = {}
    for item in meta_template or ():
        if not isinstance(item, Mapping) or "role" not in item:
            raise UserError(f"each meta template entry must be a dict with a 'role', not {item!r}")
        role = item["role"]
        if not isinstance(role, str):
            raise UserError(f"a meta template role must be a str, not {role!r}")
        if role in roles:
            raise UserError(f"role {role!r} appears twice in the meta template")
        roles[role] = dict(item)
    for role, cfg in roles.items():
        fallback = cfg.get("fallback_role")
        if fallback is not None and fallback not in roles:
            raise UserError(f"role {role!r} falls back to {fallback!r}, which the meta template does not define")
    return roles


class _TemplateParser(abc.ABC):
    """Role lookup shared by the parsers; a parser renders a dialog when called."""

    def __init__(self, meta_template: MetaTemplate | None = None) -> None:
        self.meta_template = copy.deepcopy(list(meta_template)) if meta_template else None
        self.roles = _index_roles(self.meta_template)

    @abc.abstractmethod
    def __call__(self, dialog: Dialog) -> str | Sequence[Mapping[str, object]]:
        """The rendered prompt for `dialog`: a prompt string, or the API's messages."""

    def _role_config(self, message: Mapping[str, object]) -> dict[str, object]:
        role = message.get("role")
        cfg = self.roles.get(role) if isinstance(role, str) else None
        if cfg is None:
            known = ", ".join(repr(r) for r in self.roles)
            raise UserError(f"message role {role!r} is not in the meta template (roles: {known})")
        fallback = cfg.get("fallback_role")
        return self.roles[str(fallback)] if fallback else cfg

    def __repr__(self) -> str:
        return f"{type(self).__name__}(roles={list(self.roles)})"


TemplateParserClass: TypeAlias = type[_TemplateParser]
"""A parser class: called with a meta template, it returns the parser."""


def _format_begin(cfg: Mapping[str, object], name: object) -> str:
    begin = cfg.get("begin", "")
    if isinstance(begin, str):
        return begin
    if not isinstance(begin, Mapping):
        raise UserError(f"'begin' of role {cfg.get('role')!r} must be a str or a dict, not {begin!r}")
    if name is None or "with_name" not in begin:
        return str(begin.get("without_name", ""))
    aliases = begin.get("name") or {}
    return str(begin["with_name"]).format(name=aliases.get(name, name))


def _content(message: Mapping[str, object]) -> str:
    content = message.get("content", "")
    return content if isinstance(content, str) else str(content if content is not None else "")


class LMTemplateParser(_TemplateParser):
    r"""Renders a conversation into one prompt string (for raw-completion models).

    Each message becomes ``begin + content + end`` of its role. If the conversation does
    not end with the generating role, that role's ``begin`` is appended so the model writes
    the next turn; a last message in the generating role is left open (no ``end``) when the
    role has ``generate: True``. Bare strings in the list are inserted verbatim. Without a
    meta template the non-empty contents are joined with newlines.

    Example:
        ```python
        parser = LMTemplateParser(INTERNLM2_META)
        parser([{'role': 'user', 'content': 'hi'}])
        # '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n'
        ```
    """

    def __init__(self, meta_template: MetaTemplate | None = None) -> None:
        super().__init__(meta_template)
        generating = [role for role, cfg in self.roles.items() if cfg.get("generate")]
        self.generate_role: str | None = (
            generating[0] if generating else ("assistant" if "assistant" in self.roles else None)
        )

    def __call__(self, dialog: Dialog) -> str:
        """The prompt for `dialog` (a str is returned unchanged)."""
        if isinstance(dialog, str):
            return dialog
        if not isinstance(dialog, (list, Sequence)):
            raise UserError(f"expected a list of messages or a str, not {type(dialog).__name__}")
        if not self.roles:
            return "\n".join(
                text for text in (item if isinstance(item, str) else _content(item) for item in dialog) if text
            )
        parts: list[str] = []
        last_cfg: dict[str, object] | None = None
        for index, item in enumerate(dialog):
            if isinstance(item, str):
                parts.append(item)
                continue
            cfg = self._role_config(item)
            parts.append(_format_begin(cfg, item.get("name")))
            parts.append(_content(item))
            is_last = index == len(dialog) - 1
            if not (is_last and cfg.get("generate")):
                parts.append(str(cfg.get("end", "")))
            last_cfg = cfg
        if self.generate_role is not None and (last_cfg is None or last_cfg["role"] != self.generate_role):
            parts.append(_format_begin(self.roles[self.generate_role], None))
        return "".join(parts)


def _is_native(message: Mapping[str, object]) -> bool:
    """OpenAI tool-calling messages pass through the API parser untouched."""
    return message.get("role") == "tool" or "tool_calls" in message or "tool_call_id" in message


def api_meta(environment_role: str) -> list[RoleSpec]:
    """A chat API's meta template: ``environment`` turns (tool results) sent as `environment_role`.

    System, user and assistant turns keep their roles.
    """
    roles: list[RoleSpec] = [{"role": role, "api_role": role} for role in ("system", "user", "assistant")]
    return [*roles, {"role": "environment", "api_role": environment_role}]


class APITemplateParser(_TemplateParser):
    """Maps a conversation onto a chat API's roles; returns a new list of message dicts.

    Each message's ``role`` becomes its entry's ``api_role`` (default: the role itself) and
    its content is wrapped in the entry's ``begin``/``end`` (when given as strings). Other
    keys (``name``...) are kept. Consecutive messages that end up with the same role are
    merged with a newline, as some servers reject repeated roles. OpenAI tool-calling
    messages (role ``tool``, or carrying ``tool_calls``/``tool_call_id``) and messages with
    non-text content are passed through unchanged and never merged. Without a meta
    template, roles are kept as they are. A bare string becomes a user message.
    """

    def __init__(self, meta_template: MetaTemplate | None = None) -> None:
        super().__init__(meta_template)
        self._api_roles: dict[str, tuple[object, str, str]] = {}

    def __call__(self, dialog: Dialog) -> list[dict[str, object]]:
        """The API messages for `dialog`."""
        if isinstance(dialog, str):
            return [{"role": "user", "content": dialog}]
        if not isinstance(dialog, (list, Sequence)):
            raise UserError(f"expected a list of messages or a str, not {type(dialog).__name__}")
        out: list[dict[str, object]] = []
        mergeable: list[bool] = []
        for item in dialog:
            message: Mapping[str, object] = {"role": "user", "content": item} if isinstance(item, str) else item
            if _is_native(message) or not isinstance(message.get("content", ""), (str, type(None))):
                out.append(dict(message))
                mergeable.append(False)
                continue
            new = self._to_api(message)
            if out and mergeable[-1] and out[-1]["role"] == new["role"]:
                out[-1]["content"] = f"{out[-1]['content']}\n{new['content']}"
                continue
            out.append(new)
            mergeable.append(True)
        return out

    def _to_api(self, message: Mapping[str, object]) -> dict[str, object]:
        new = dict(message)
        content = _content(message)
        if not self.roles:
            new["content"] = content
            return new
        role, begin, end = self._api_role(message)
        new["role"] = role
        new["content"] = begin + content + end if begin or end else content
        return new

    def _api_role(self, message: Mapping[str, object]) -> tuple[object, str, str]:
        """``(api_role, begin, end)`` of the message's role (kept per role once resolved)."""
        role = message.get("role")
        spec = self._api_roles.get(role) if isinstance(role, str) else None
        if spec is None:
            cfg = self._role_config(message)
            begin, end = cfg.get("begin", ""), cfg.get("end", "")
            spec = (
                cfg.get("api_role", cfg["role"]),
                begin if isinstance(begin, str) else "",
                end if isinstance(end, str) else "",
            )
            self._api_roles[str(role)] = spec
        return spec
