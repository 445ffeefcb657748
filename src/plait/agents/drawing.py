"""`draw(agent)`: a picture of an agent tree, as Mermaid flowchart text, Graphviz DOT text, or a PNG.

The picture shows the agent and everything below it:

* sub-agents (`AgentModule.named_children`: attributes, `Sequential` / `AgentList` /
  `AgentDict` members), an arrow labelled with the name each is registered under;
* tools: the actions of each executor the agent holds (``executor``, ``plugin_executor``, ...);
  a toolkit is one node with an arrow to each of its APIs, an MCP toolkit one node with the
  tools it listed (nothing is asked of the server);
* an agent held as a tool (`AgentModule.as_tool`): the tool node, with an arrow to the agent it runs;
* handoffs: a dashed arrow labelled with the tool name to each agent in ``agent.handoffs``
  (items with ``.agent`` and ``.tool_name``), instead of the sub-agent arrow when the target is
  also registered as a sub-agent;
* tools that need a person's approval: marked "needs approval" (a fixed rule) or
  "approval by rule" (a function decides per call), and coloured.

An agent reached twice (a shared sub-agent, a handoff back) is one node. Ids (``a0``, ``t0``,
``k0``) are given in the order of a depth-first walk, so the same tree always gives the same
text. Names and descriptions are escaped: no name can break the Mermaid or DOT syntax.

```python
from plait import Agent, Sequential, draw
from plait.testing import ScriptedLLM

pipeline = Sequential(Agent(ScriptedLLM([]), name='writer'), Agent(ScriptedLLM([]), name='critic'))
print(draw(pipeline))             # flowchart TD ... (paste into any Mermaid viewer, or a ```mermaid block)
print(draw(pipeline, format='dot'))  # digraph ... (streamlit's st.graphviz_chart draws it)
```
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

from ..actions.action_executor import ActionExecutorCore
from ..actions.base_action import ActionCore
from ..exceptions import UserError
from .agent_tool import AgentTool
from .handoff import HandoffTool
from .module import AgentModule

__all__ = ["draw"]

Format = Literal["mermaid", "dot", "png"]
Direction = Literal["TB", "LR"]
_FORMATS: tuple[str, ...] = ("mermaid", "dot", "png")
_DIRECTIONS: tuple[str, ...] = ("TB", "LR")
_Kind = Literal["agent", "tool", "toolkit", "mcp", "approval"]
_EdgeKind = Literal["child", "tool", "runs", "handoff"]
_DESCRIPTION_LIMIT = 60

# Mermaid: what stays as it is in a quoted label; everything else becomes an entity code (#60;)
_MERMAID_SAFE = frozenset(" _-.,:/()+=@'?!")

_STYLE = {  # (fill, border) per kind, the same in both formats
    "agent": ("#e8f0fe", "#1a56db"),
    "tool": ("#f3f4f6", "#6b7280"),
    "toolkit": ("#ecfdf5", "#059669"),
    "mcp": ("#ecfdf5", "#059669"),
    "approval": ("#fff4e5", "#d97706"),
}


@dataclass(frozen=True)
class _Node:
    id: str
    kind: _Kind
    title: str
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Edge:
    source: str
    target: str
    kind: _EdgeKind
    label: str = ""


@dataclass
class _Graph:
    """The tree as nodes and edges, built by one depth-first walk (`add_agent`)."""

    nodes: list[_Node] = field(default_factory=list)
    edges: list[_Edge] = field(default_factory=list)
    seen: dict[int, str] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)

    def _new_id(self, prefix: str) -> str:
        number = self.counters.get(prefix, 0)
        self.counters[prefix] = number + 1
        return f"{prefix}{number}"

    def add_agent(self, agent: Any) -> str:
        """The node of `agent` (added with its tools, sub-agents and handoffs the first time)."""
        known = self.seen.get(id(agent))
        if known is not None:
            return known
        node_id = self._new_id("a")
        self.seen[id(agent)] = node_id
        kind = type(agent).__name__
        name = str(getattr(agent, "name", "") or kind)
        details = [kind] if name != kind else []
        description = _short(getattr(agent, "description", None))
        if description:
            details.append(description)
        self.nodes.append(_Node(node_id, "agent", name, tuple(details)))
        for attribute, executor in _executors(agent):
            label = "" if attribute == "executor" else attribute
            for action in list(executor.actions.values()):
                if not isinstance(action, HandoffTool):  # drawn as its dashed handoff arrow
                    self._edge_to(node_id, action, "tool", label)
        handoffs = [(h.agent, str(getattr(h, "tool_name", "") or "")) for h in _handoffs(agent)]
        targets = {id(target) for target, _ in handoffs}
        if isinstance(agent, AgentModule):
            for child_name, child in list(agent.named_children()):
                if id(child) not in targets:  # a handoff target registered as a sub-agent: its dashed arrow says more
                    self._edge_to(node_id, child, "child", child_name)
        for target, tool_name in handoffs:
            self._edge_to(node_id, target, "handoff", tool_name)
        return node_id

    def _edge_to(self, source: str, target: Any, kind: _EdgeKind, label: str) -> None:
        """An edge from `source` to `target`'s node (added first), listed before the edges below it."""
        position = len(self.edges)
        target_id = self.add_action(target) if isinstance(target, ActionCore) else self.add_agent(target)
        self.edges.insert(position, _Edge(source, target_id, kind, label))

    def add_action(self, action: ActionCore) -> str:
        """The node of a tool (a toolkit: one node with an arrow to each API)."""
        known = self.seen.get(id(action))
        if known is not None:
            return known
        mcp = _is_mcp(action)
        description: Mapping[str, Any] | None = vars(action).get("_described") if mcp else action.description
        description = description if isinstance(description, Mapping) else {"name": action.name}
        disabled = () if action.enable else ("disabled",)
        if mcp or "api_list" in description:
            node_id = self._new_id("k")
            self.seen[id(action)] = node_id
            summary = _short(description.get("description"))
            details = ("MCP server",) if mcp else ("toolkit",)
            self.nodes.append(
                _Node(
                    node_id,
                    "mcp" if mcp else "toolkit",
                    action.name,
                    details + ((summary,) if summary else ()) + disabled,
                )
            )
            for api in description.get("api_list") or ():
                if isinstance(api, Mapping):
                    self.edges.append(
                        _Edge(node_id, self._tool_node(action, str(api.get("name", "")), api, disabled), "tool")
                    )
            return node_id
        node_id = self._tool_node(action, "run", description, disabled)
        self.seen[id(action)] = node_id
        if isinstance(action, AgentTool):
            self._edge_to(node_id, action.agent, "runs", "runs")
        return node_id

    def _tool_node(self, action: ActionCore, api: str, description: Mapping[str, Any], extra: tuple[str, ...]) -> str:
        node_id = self._new_id("t")
        title = action.name if api == "run" else api
        details: list[str] = ["agent as tool"] if isinstance(action, AgentTool) else []
        summary = _short(description.get("description"))
        if summary:
            details.append(summary)
        approval = _approval(action, api)
        if approval:
            details.append(approval)
        details.extend(extra)
        self.nodes.append(_Node(node_id, "approval" if approval else "tool", title, tuple(details)))
        return node_id


def _executors(agent: Any) -> list[tuple[str, ActionExecutorCore]]:
    """The executors `agent` holds, by attribute name, in the order they were set."""
    attributes = getattr(agent, "__dict__", {})
    return [(name, value) for name, value in attributes.items() if isinstance(value, ActionExecutorCore)]


def _handoffs(agent: Any) -> list[Any]:
    """``agent.handoffs`` as a list (nothing when it has none, or something that is not a sequence)."""
    handoffs = getattr(agent, "handoffs", None)
    if handoffs is None or isinstance(handoffs, (str, bytes, Mapping)) or not isinstance(handoffs, Iterable):
        return []
    return [handoff for handoff in handoffs if getattr(handoff, "agent", None) is not None]


def _is_mcp(action: object) -> bool:
    """Whether `action` is an MCP toolkit (no MCP toolkit exists unless its module was imported)."""
    module = sys.modules.get("plait.actions.mcp.toolkit")
    core = getattr(module, "_MCPToolkitCore", None)
    return isinstance(core, type) and isinstance(action, core)


def _approval(action: ActionCore, api: str) -> str:
    """``'needs approval'``, ``'approval by rule'`` or ``''`` for API `api` of `action`."""
    try:
        rule = action.approval_rule(api)
    except Exception:  # a tool's own lookup failed: it fails closed when called, so show it gated
        return "needs approval"
    if callable(rule):
        return "approval by rule"
    return "needs approval" if rule else ""


def _short(text: object) -> str:
    """The first line of `text`, whitespace collapsed, at most `_DESCRIPTION_LIMIT` characters."""
    if not isinstance(text, str):
        return ""
    stripped = text.strip()
    line = " ".join(stripped.splitlines()[0].split()) if stripped else ""
    return line if len(line) <= _DESCRIPTION_LIMIT else line[: _DESCRIPTION_LIMIT - 1].rstrip() + "…"


def _one_line(text: str) -> str:
    """`text` on one line: whitespace runs as one space, control characters (NUL, ESC...) left out."""
    return " ".join("".join(ch for ch in text if ch.isspace() or unicodedata.category(ch) != "Cc").split())


# -- Mermaid ----------------------------------------------------------------------------------


def _mermaid_text(text: str) -> str:
    """`text` for a quoted Mermaid label: letters, digits and a few marks kept, the rest as ``#<code>;``."""
    return "".join(ch if ch.isalnum() or ch in _MERMAID_SAFE else f"#{ord(ch)};" for ch in _one_line(text))


_MERMAID_SHAPES = {"agent": ('["', '"]'), "tool": ('(["', '"])'), "approval": ('{{"', '"}}')}
_MERMAID_SHAPES.update({"toolkit": ('[["', '"]]'), "mcp": ('[("', '")]')})
_MERMAID_ARROWS = {"child": "-->", "tool": "-->", "runs": "==>", "handoff": "-.->"}


def _mermaid(graph: _Graph, direction: Direction) -> str:
    lines = [f"flowchart {'TD' if direction == 'TB' else direction}"]
    for node in graph.nodes:
        opening, closing = _MERMAID_SHAPES[node.kind]
        label = "<br/>".join([f"<b>{_mermaid_text(node.title)}</b>", *map(_mermaid_text, node.details)])
        lines.append(f"    {node.id}{opening}{label}{closing}")
    for edge in graph.edges:
        arrow = _MERMAID_ARROWS[edge.kind]
        label = f'|"{_mermaid_text(edge.label)}"|' if edge.label else ""
        lines.append(f"    {edge.source} {arrow}{label} {edge.target}")
    used = [kind for kind in _STYLE if any(node.kind == kind for node in graph.nodes)]
    for kind in used:
        fill, border = _STYLE[kind]
        lines.append(f"    classDef {kind} fill:{fill},stroke:{border},color:#111827")
    for kind in used:
        lines.append(f"    class {','.join(node.id for node in graph.nodes if node.kind == kind)} {kind}")
    return "\n".join(lines) + "\n"


# -- Graphviz DOT -----------------------------------------------------------------------------


def _dot_text(text: str) -> str:
    """`text` inside a double-quoted DOT string: backslashes and quotes escaped, one line."""
    return _one_line(text).replace("\\", "\\\\").replace('"', '\\"')


_DOT_SHAPES = {"agent": "box", "tool": "ellipse", "approval": "hexagon", "toolkit": "folder", "mcp": "cylinder"}
_DOT_EDGES = {"child": "", "tool": "", "runs": ", style=bold", "handoff": ", style=dashed"}


def _dot(graph: _Graph, direction: Direction) -> str:
    lines = [
        "digraph agents {",
        f"    rankdir={direction};",
        '    node [fontname="Helvetica", fontsize=11, style="rounded,filled"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    for node in graph.nodes:
        fill, border = _STYLE[node.kind]
        label = "\\n".join(_dot_text(part) for part in (node.title, *node.details))
        shape = _DOT_SHAPES[node.kind]
        lines.append(f'    {node.id} [label="{label}", shape={shape}, fillcolor="{fill}", color="{border}"];')
    for edge in graph.edges:
        label = f'label="{_dot_text(edge.label)}"' if edge.label else ""
        style = _DOT_EDGES[edge.kind]
        attributes = (label + style).lstrip(", ")
        lines.append(f"    {edge.source} -> {edge.target}" + (f" [{attributes}];" if attributes else ";"))
    return "\n".join(lines) + "\n}\n"


# -- PNG --------------------------------------------------------------------------------------

_NO_RENDERER = (
    "draw(format='png') needs a renderer on PATH and found none: install Graphviz (its `dot` command: "
    "`apt-get install graphviz`, `brew install graphviz`, `conda install graphviz`) or the Mermaid CLI "
    "(`mmdc`: `npm install -g @mermaid-js/mermaid-cli`); or draw format='mermaid' or format='dot' and "
    "render the text elsewhere"
)


def _png(graph: _Graph, direction: Direction) -> bytes:
    """The picture as PNG bytes, by Graphviz ``dot`` if installed, else the Mermaid CLI ``mmdc``.

    Raises:
        UserError: Neither is on PATH (the message says what to install), or the renderer failed.
    """
    dot = shutil.which("dot")
    if dot is not None:
        return _render([dot, "-Tpng"], _dot(graph, direction).encode(), None)
    mmdc = shutil.which("mmdc")
    if mmdc is None:
        raise UserError(_NO_RENDERER)
    with tempfile.TemporaryDirectory(prefix="plait-draw-") as folder:
        source, target = Path(folder, "agent.mmd"), Path(folder, "agent.png")
        source.write_text(_mermaid(graph, direction), "utf-8")
        return _render([mmdc, "-i", str(source), "-o", str(target)], None, target)


def _render(command: list[str], stdin: bytes | None, output: Path | None) -> bytes:
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{Path(command[0]).name} could not draw the agent: {exc}") from exc
    data = done.stdout if output is None else (output.read_bytes() if output.is_file() else b"")
    if done.returncode != 0 or not data:
        problem = done.stderr.decode("utf-8", "replace").strip()[-500:] or f"exit status {done.returncode}"
        raise UserError(f"{Path(command[0]).name} could not draw the agent: {problem}")
    return data


# -- the entry point --------------------------------------------------------------------------


@overload
def draw(agent: Any, format: Literal["mermaid", "dot"] = "mermaid", direction: Direction = "TB") -> str: ...
@overload
def draw(agent: Any, format: Literal["png"], direction: Direction = "TB") -> bytes: ...
def draw(agent: Any, format: Format = "mermaid", direction: Direction = "TB") -> str | bytes:
    """A picture of `agent`'s tree: sub-agents, tools, agents held as tools, handoffs, approval gates.

    Args:
        agent: Any plait agent (a paradigm, a container, a hand-written `Agent` subclass).
        format: ``"mermaid"`` (flowchart text), ``"dot"`` (Graphviz text) or ``"png"`` (image
            bytes, drawn by Graphviz ``dot`` or the Mermaid CLI ``mmdc``, whichever is installed).
        direction: ``"TB"`` (top to bottom) or ``"LR"`` (left to right: taller, narrower
            pictures of agents with many tools).

    Returns:
        The text, or the PNG bytes.

    Raises:
        UserError: An unknown `format` or `direction`, or ``"png"`` with no renderer installed
            (the message says what to install).
    """
    if format not in _FORMATS:
        raise UserError(f"format must be one of {', '.join(map(repr, _FORMATS))}, not {format!r}")
    if direction not in _DIRECTIONS:
        raise UserError(f"direction must be one of {', '.join(map(repr, _DIRECTIONS))}, not {direction!r}")
    graph = _Graph()
    graph.add_agent(agent)
    if format == "mermaid":
        return _mermaid(graph, direction)
    if format == "dot":
        return _dot(graph, direction)
    return _png(graph, direction)
