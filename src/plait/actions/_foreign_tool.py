"""`ForeignToolCore`: the shared constructor of plait tools that wrap another library's tool (LangChain, AgentLego)."""

from __future__ import annotations

import abc
from typing import Any

from ._tool_api import ApprovalRule
from .base_action import ActionCore
from .parser import BaseParser, JsonParser

__all__ = ["ForeignToolCore"]


class ForeignToolCore(ActionCore, register=False):
    """A tool of another library as a simple plait tool (API ``run``), kept as ``self.tool``.

    Subclasses say how a tool is accepted (`_adopt`: check it, maybe copy it) and what
    models see of it (`_describe`: a plait description with the tool's parameters).
    The constructor's arguments are documented on the concrete tools.
    """

    def __init__(
        self,
        tool: Any,
        *,
        name: str | None = None,
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        requires_approval: ApprovalRule = False,
    ) -> None:
        self.tool = self._adopt(tool)
        super().__init__(self._describe(self.tool, name), parser, enable, requires_approval=requires_approval)

    @abc.abstractmethod
    def _adopt(self, tool: Any) -> Any:
        """The tool to call (`tool` itself or a copy of it).

        Raises:
            UserError: `tool` is not a tool of the library.
            MissingDependencyError: The library is not installed.
        """

    @abc.abstractmethod
    def _describe(self, tool: Any, name: str | None) -> dict[str, Any]:
        """The plait description of `tool` (named `name` when given)."""
