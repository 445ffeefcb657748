r"""Ready-made meta templates (see `plait.llms.templates` for the format).

`INTERNLM2_META` is InternLM2's ChatML dialect: every turn is
``<|im_start|>{role}[ name={name}]\n{content}<|im_end|>\n``. Tool descriptions go in a
system turn and tool results in an ``environment`` turn, named ``<|interpreter|>`` or
``<|plugin|>`` (the names ``interpreter`` and ``plugin`` map to those tokens)::

    <|im_start|>system name=<|plugin|>
    [{"name": "search", ...}]<|im_end|>
    <|im_start|>environment name=<|plugin|>
    {"results": ...}<|im_end|>
"""

from __future__ import annotations

from .templates import RoleBegin, RoleSpec

__all__ = ["INTERNLM2_META"]

_TOOL_NAMES = {"interpreter": "<|interpreter|>", "plugin": "<|plugin|>"}


def _chatml_role(role: str, names: dict[str, str] | None = None) -> RoleSpec:
    begin: RoleBegin = {
        "with_name": f"<|im_start|>{role} name={{name}}\n",
        "without_name": f"<|im_start|>{role}\n",
    }
    if names:
        begin["name"] = dict(names)
    return {"role": role, "begin": begin, "end": "<|im_end|>\n"}


INTERNLM2_META: list[RoleSpec] = [
    _chatml_role("system", _TOOL_NAMES),
    _chatml_role("user"),
    _chatml_role("assistant", _TOOL_NAMES),
    _chatml_role("environment", _TOOL_NAMES),
]
