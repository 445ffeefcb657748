"""`AgentLegoTool`: a tool of the AgentLego library as a plait action.

```python
from agentlego.tools import Calculator
from plait.actions import ActionExecutor, AgentLegoTool

executor = ActionExecutor([AgentLegoTool(Calculator())])   # AgentLego's name, description and inputs
```

An AgentLego tool declares its inputs and outputs in its ``toolmeta``: each input becomes
a parameter (``str``, ``int``, ``float``, ``bool`` as such; ``ImageIO``, ``AudioIO`` and
``File`` as a file path), the description is the tool's own. The tool is called through
AgentLego's ``DefaultParser`` on a copy of it, so paths become images, audio and files on
the way in, and on the way out images, audio and files are saved (under
``$AGENTLEGO_TMPDIR``, default ``./generated``) and returned as ``image``/``audio``/``file``
result items holding the path; other outputs are text. An input AgentLego cannot convert
(a missing file, ``'abc'`` for an ``int``) is an ``ARGS_ERROR`` return, an exception in the
tool an ``API_ERROR`` return, both written for the model.

A model-backed tool loads its model (AgentLego's ``setup``) on its first call. Needs the
``agentlego`` extra (``pip install 'plait[agentlego]'``); this module imports AgentLego
only when a tool is built.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any

from ..exceptions import ToolArgumentError, UserError
from ..llms._optional import import_optional
from ..types import JSONValue
from ._foreign_tool import ForeignToolCore
from ._types import BOOLEAN, FLOAT, NUMBER, STRING
from .base_action import AsyncActionMixin, BaseAction

__all__ = ["AgentLegoTool", "AsyncAgentLegoTool"]

_SCALARS = {str: STRING, int: NUMBER, float: FLOAT, bool: BOOLEAN}
_FILE_KINDS = {"ImageIO": "image", "AudioIO": "audio", "File": "file"}  # AgentLego's IO types -> result item types
_FILE_INPUTS = {"image": "path to an image file", "audio": "path to an audio file", "file": "path to a file"}


def _file_kind(kind: object) -> str | None:
    """``'image'``, ``'audio'`` or ``'file'`` for AgentLego's IO types, else None."""
    if isinstance(kind, type) and kind.__module__.startswith("agentlego"):
        return _FILE_KINDS.get(kind.__name__)
    return None


def _parameter(spec: Any) -> dict[str, JSONValue]:
    """One AgentLego input (``Parameter``) as a plait parameter description."""
    description = str(spec.description or "")
    kind = _file_kind(spec.type)
    if kind is not None:
        what = _FILE_INPUTS[kind] + (f" ({spec.filetype})" if spec.filetype else "")
        description = what + (f": {description}" if description else "")
    if spec.optional:
        description += f" (default: {spec.default!r})" if description else f"default: {spec.default!r}"
    return {"name": str(spec.name), "type": _SCALARS.get(spec.type, STRING), "description": description}


class _AgentLegoToolCore(ForeignToolCore, register=False):
    """What `AgentLegoTool` and `AsyncAgentLegoTool` share (the arguments are `AgentLegoTool`'s)."""

    requires = (("agentlego", "agentlego"),)

    def _adopt(self, tool: Any) -> Any:
        tools = import_optional("agentlego.tools", "agentlego", type(self).__name__)
        if not isinstance(tool, tools.BaseTool) and callable(tool) and hasattr(tool, "toolmeta"):
            tool = tool()  # a function made with agentlego's @make_tool: build the tool
        if not isinstance(tool, tools.BaseTool):
            raise UserError(f"{type(self).__name__} wraps an AgentLego tool (agentlego.tools.BaseTool), not {tool!r}")
        parsers = import_optional("agentlego.parsers", "agentlego", type(self).__name__)
        adopted = copy.copy(tool)  # AgentLego's own copy protocol: a private parser on shared weights
        adopted.set_parser(parsers.DefaultParser)  # paths in, paths out
        self._setup_lock = threading.Lock()
        return adopted

    def _describe(self, tool: Any, name: str | None) -> dict[str, Any]:
        inputs: Sequence[Any] = tool.inputs or ()
        return {
            "name": name or str(tool.name),
            "description": str(tool.toolmeta.description or ""),
            "parameters": [_parameter(spec) for spec in inputs],
            "required": [str(spec.name) for spec in inputs if not spec.optional],
        }

    def run(self, **arguments: Any) -> list[dict[str, Any]]:
        """Call the AgentLego tool: inputs converted by AgentLego, outputs as result items."""
        tool = self.tool
        with self._setup_lock:  # a model-backed tool loads its model once, on the first call
            if not tool._is_setup:
                tool.setup()
                tool._is_setup = True
        try:
            args, kwargs = tool.parser.parse_inputs(**arguments)
        except (TypeError, ValueError, OSError, NotImplementedError) as exc:  # what AgentLego's types raise
            raise ToolArgumentError(str(exc) or type(exc).__name__, tool=self.name) from exc
        outputs = tool.parser.parse_outputs(tool.apply(*args, **kwargs))
        return self._items(outputs)

    def _items(self, outputs: object) -> list[dict[str, Any]]:
        """Result items for the tool's outputs, typed by its declared outputs (one item per output)."""
        specs: Sequence[Any] = self.tool.outputs or ()
        values = list(outputs) if isinstance(outputs, tuple) and len(specs) > 1 else [outputs]
        items: list[dict[str, Any]] = []
        for index, value in enumerate(values):
            kind = _file_kind(specs[index].type) if index < len(specs) else None
            if kind is not None:
                items.append({"type": kind, "content": str(value)})
            elif value is not None:
                items.append({"type": "text", "content": value if isinstance(value, str) else str(value)})
        return items


class AgentLegoTool(_AgentLegoToolCore, BaseAction):
    """An AgentLego tool (``agentlego.tools.BaseTool``, or an ``@make_tool`` function) as a plait tool.

    Args:
        tool: The AgentLego tool (e.g. ``agentlego.tools.Calculator()``).
        name: The name models see (default: the tool's ``name``).
        parser: The argument parser class.
        enable: Whether executors offer this tool.
        requires_approval: Each call needs a person's approval first: True, or a rule
            ``(tool name, arguments) -> bool``.

    Raises:
        UserError: `tool` is not an AgentLego tool.
        MissingDependencyError: ``agentlego`` is not installed.
    """


class AsyncAgentLegoTool(AsyncActionMixin, _AgentLegoToolCore, sibling_of=AgentLegoTool):
    """The async twin of `AgentLegoTool` (same arguments): ``await tool(inputs)`` runs it in a worker thread."""
