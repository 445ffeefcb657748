"""Issue 39 item 3: `plait.draw(agent)`, a picture of an agent tree (Mermaid, DOT, PNG).

Three trees are pinned by golden files (``tests/golden/draw/<tree>.mmd`` and ``.dot``;
regenerate with ``PLAIT_GOLDEN_UPDATE=1`` and review ``git diff tests/golden/draw``).
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import plait
import plait.agents
from plait import Agent, AgentDict, FunctionCallingAgent, Sequential, draw
from plait.actions import BaseAction, tool_api
from plait.exceptions import UserError
from plait.testing import ScriptedLLM

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "draw"
UPDATE = os.environ.get("PLAIT_GOLDEN_UPDATE", "") not in ("", "0")
MCP_SERVER = Path(__file__).resolve().parents[1] / "actions" / "mcp" / "demo_server.py"


def get_weather(city: str) -> str:
    """Look up today's weather in a city.

    Args:
        city: The city's name.
    """
    return f"sunny in {city}"


class Payments(BaseAction):
    """Move money between accounts."""

    @tool_api(requires_approval=True)
    def transfer(self, to: str, amount: int) -> str:
        """Send money to an account.

        Args:
            to: Who gets it.
            amount: How much, in cents.
        """
        return f"sent {amount} to {to}"

    @tool_api(requires_approval=lambda name, arguments: int(arguments.get("amount", 0)) > 100)
    def refund(self, amount: int) -> str:
        """Refund a payment (over 100 needs approval).

        Args:
            amount: How much, in cents.
        """
        return f"refunded {amount}"

    @tool_api
    def balance(self) -> str:
        """The account's balance."""
        return "120"


class Search(BaseAction):
    """Search the team's notes."""

    @tool_api
    def run(self, query: str) -> str:
        """Search the notes.

        Args:
            query: What to look for.
        """
        return "nothing"


def assistant_tree() -> Any:
    """A FunctionCallingAgent with a function tool, a toolkit whose APIs are gated, and a gated simple tool."""
    return FunctionCallingAgent(
        ScriptedLLM([]),
        [get_weather, Payments(), Search(requires_approval=True)],
        "Help with the weather and payments.",
        name="assistant",
        description="Answers questions; pays with approval.",
    )


def blog_pipeline() -> Any:
    """The blogger / critic pipeline as a `Sequential`."""
    blogger = Agent(ScriptedLLM([]), "Write a blog post.", name="blogger", description="Writes a first draft.")
    critic = Agent(ScriptedLLM([]), "Criticise the draft.", name="critic", description="Reviews the draft.")
    return Sequential(blogger, critic, name="blog")


def editor_tree() -> Any:
    """A lead agent holding a critic through `as_tool`, plus a toolkit."""
    critic = Agent(ScriptedLLM([]), "Criticise drafts.", name="critic", description="Reviews drafts.")
    return FunctionCallingAgent(
        ScriptedLLM([]),
        [critic.as_tool(description="Reviews a draft.", history="per_conversation"), Payments()],
        "Write, ask the critic, then publish.",
        name="editor",
    )


TREES = {"assistant_tools": assistant_tree, "blog_sequential": blog_pipeline, "editor_agent_tool": editor_tree}


def _check_golden(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    expected = path.read_text("utf-8") if path.is_file() else ""
    diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), str(path), "drawn"))
    assert text == expected, f"the drawing changed (PLAIT_GOLDEN_UPDATE=1 to accept):\n{diff}"


@pytest.mark.parametrize("tree", sorted(TREES))
@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
def test_drawing_is_pinned(tree: str, fmt: str) -> None:
    text = draw(TREES[tree](), format=fmt)  # type: ignore[call-overload]
    _check_golden(GOLDEN / f"{tree}.{'mmd' if fmt == 'mermaid' else 'dot'}", text)
    assert draw(TREES[tree](), format=fmt) == text  # type: ignore[call-overload]  # a new tree: the same text


def test_golden_files_are_exactly_the_trees() -> None:
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(f"{t}.{x}" for t in TREES for x in ("dot", "mmd"))


def test_draw_is_exported_from_plait() -> None:
    assert plait.draw is draw and "draw" in plait.__all__ and plait.agents.draw is draw


def test_approval_gates_are_marked() -> None:
    text = draw(assistant_tree())
    node = {m[2]: m[3] for m in re.finditer(r"^ {4}(\w+)\S*?\"<b>([^<]*)</b>(.*)\"", text, re.M)}
    assert "needs approval" in node["transfer"] and "approval by rule" in node["refund"]
    assert "needs approval" in node["Search"] and "approval" not in node["balance"] + node["get_weather"]
    ids = {m[2]: m[1] for m in re.finditer(r"^ {4}(\w+)\S*?\"<b>([^<]*)</b>", text, re.M)}
    assert re.search(rf"class (\w+,)*{ids['transfer']}(,\w+)* approval$", text, re.M)


@dataclass
class Handoff:
    """A stand-in for the handoff objects an agent will expose as ``handoffs``."""

    agent: Any
    tool_name: str


def test_handoffs_are_dashed_edges_labelled_with_the_tool_name() -> None:
    triage = FunctionCallingAgent(ScriptedLLM([]), [get_weather], name="triage")
    billing = FunctionCallingAgent(ScriptedLLM([]), [Payments()], name="billing")
    refunds = Agent(ScriptedLLM([]), name="refunds")
    triage.handoffs = [Handoff(billing, "transfer_to_billing"), Handoff(refunds, "transfer_to_refunds")]
    billing.handoffs = (Handoff(triage, "transfer_to_triage"),)  # a cycle: triage is drawn once
    text = draw(triage)
    ids = {m[2]: m[1] for m in re.finditer(r"^ {4}(a\d+)\[\"<b>([^<]*)</b>", text, re.M)}
    assert sorted(ids) == ["billing", "refunds", "triage"]
    assert f'    {ids["triage"]} -.->|"transfer_to_billing"| {ids["billing"]}' in text.splitlines()
    assert f'    {ids["triage"]} -.->|"transfer_to_refunds"| {ids["refunds"]}' in text.splitlines()
    assert f'    {ids["billing"]} -.->|"transfer_to_triage"| {ids["triage"]}' in text.splitlines()
    dot = draw(triage, format="dot")
    assert f'{ids["triage"]} -> {ids["billing"]} [label="transfer_to_billing", style=dashed];' in dot


def _paradigms() -> list[str]:
    return sorted(
        name
        for name in plait.agents.__all__
        if isinstance(cls := getattr(plait.agents, name), type) and issubclass(cls, plait.agents.AgentModule)
    )


@pytest.mark.parametrize("name", _paradigms())
def test_every_agent_class_is_drawn_with_its_tools(name: str) -> None:
    cls = getattr(plait.agents, name)
    parameters = inspect.signature(cls).parameters
    if "url" in parameters:  # RemoteA2AAgent: a remote agent, no tools here
        agent = cls(url="http://127.0.0.1:9/")
    else:
        kwargs: dict[str, Any] = {"llm": ScriptedLLM([])} if "llm" in parameters else {}
        kwargs.update({key: [get_weather] for key in ("actions", "plugins") if key in parameters})
        if "plugin_executor" in parameters:
            kwargs["plugin_executor"] = plait.ActionExecutor([get_weather])
        agent = cls(**kwargs)
    text = draw(agent)
    assert text.startswith('flowchart TD\n    a0["<b>')
    if any(key in parameters for key in ("actions", "plugins", "plugin_executor")):
        assert '(["<b>get_weather</b>' in text


def test_a_handoff_target_registered_as_a_sub_agent_gets_only_the_dashed_edge() -> None:
    triage = Agent(ScriptedLLM([]), name="triage")
    triage.billing = Agent(ScriptedLLM([]), name="billing")
    triage.notes = Agent(ScriptedLLM([]), name="notes")
    triage.handoffs = [Handoff(triage.billing, "transfer_to_billing")]
    edges = [line for line in draw(triage).splitlines() if " a0 " in line or line.startswith("    a0 ")]
    assert edges == ['    a0 -->|"notes"| a1', '    a0 -.->|"transfer_to_billing"| a2']  # sub-agents, then handoffs


def test_something_that_is_not_an_agent_is_drawn_as_one_node() -> None:
    holder = Agent(ScriptedLLM([]), name="holder")
    holder.handoffs = [Handoff(object(), "transfer_to_nothing"), Handoff(None, "ignored")]
    lines = draw(holder).splitlines()
    assert '    a1["<b>object</b>"]' in lines and '    a0 -.->|"transfer_to_nothing"| a1' in lines
    assert not any("ignored" in line for line in lines)


def test_a_shared_sub_agent_is_one_node() -> None:
    shared = Agent(ScriptedLLM([]), name="shared")
    team = AgentDict({"first": shared, "second": Sequential(shared)})
    text = draw(team)
    assert text.count('"<b>shared</b>') == 1
    assert len(re.findall(r"-->\|\"0\"\| a1$", text, re.M)) == 1  # the Sequential's member is the same node


HOSTILE = (
    'x"] --> evil["pwned"]\n%% comment\nclick a0 call alert(1) ; `md` <script>&amp;</script> #35; |pipe| {b}'
    ' \\N\\" \x00\x1b[31m\u200dé中'
)
CONTROLS = "\x00\x1b"


def _decode_mermaid(label: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m[1])), label)


def test_hostile_names_cannot_break_the_syntax() -> None:
    inner = Agent(ScriptedLLM([]), name=HOSTILE, description=HOSTILE + "\nsecond line")
    tool = BaseAction({"name": HOSTILE, "description": HOSTILE, "parameters": [], "required": []})
    outer = FunctionCallingAgent(ScriptedLLM([]), [tool], name="outer")
    outer.team = AgentDict({"k" + HOSTILE.replace(".", ""): inner})
    text = draw(outer)
    node = re.compile(
        r'^ {4}[akt]\d+(\["|\(\["|\{\{"|\[\["|\[\(")((?:<b>|</b>|<br/>|[^"<>\n|`])*)("\]|"\]\)|"\}\}|"\]\]|"\)\])$'
    )
    edge = re.compile(r'^ {4}[akt]\d+ (-->|==>|-\.->)(\|"[^"<>\n|`]*"\|)? [akt]\d+$')
    style = re.compile(r"^ {4}(classDef \w+ [\w:#,-]+|class [akt\d,]+ \w+)$")
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    bad = [line for line in lines[1:] if not (node.match(line) or edge.match(line) or style.match(line))]
    assert bad == []
    labels = [_decode_mermaid(m[2]) for line in lines if (m := node.match(line))]
    flat = " ".join(HOSTILE.translate({ord(c): None for c in CONTROLS}).split())
    assert not any(c in text for c in CONTROLS)
    assert f'<b>{flat}</b><br/>Agent<br/>x"] --> evil["pwned"]' in labels  # the inner agent, text intact
    edge_labels = [_decode_mermaid(m[2]) for line in lines if (m := edge.match(line)) and m[2]]
    assert f'|"k{flat.replace(".", "")}"|' in edge_labels
    dot = draw(outer, format="dot").splitlines()
    quoted = r'"(?:[^"\\\n]|\\.)*"'
    dot_node = re.compile(rf"^ {{4}}[akt]\d+ \[label={quoted}, shape=\w+, fillcolor={quoted}, color={quoted}\];$")
    dot_edge = re.compile(rf"^ {{4}}[akt]\d+ -> [akt]\d+( \[label={quoted}(, style=\w+)?\]| \[style=\w+\])?;$")
    body = dot[4:-1]
    assert [line for line in body if not (dot_node.match(line) or dot_edge.match(line))] == []
    assert dot[-1] == "}" and not any(c in "\n".join(dot) for c in CONTROLS)
    assert any(
        line.startswith('    a2 [label="' + flat.replace("\\", "\\\\").replace('"', '\\"') + "\\nAgent") for line in dot
    )


def test_unknown_format_is_a_user_error() -> None:
    with pytest.raises(UserError, match="format must be one of 'mermaid', 'dot', 'png'"):
        draw(blog_pipeline(), format="svg")  # type: ignore[call-overload]


def test_direction_left_to_right() -> None:
    tree = blog_pipeline()
    assert draw(tree, direction="LR").splitlines()[0] == "flowchart LR"
    assert "    rankdir=LR;" in draw(tree, format="dot", direction="LR").splitlines()
    assert draw(tree, direction="LR").splitlines()[1:] == draw(tree).splitlines()[1:]
    with pytest.raises(UserError, match="direction must be one of 'TB', 'LR', not 'BT'"):
        draw(tree, direction="BT")  # type: ignore[arg-type]


def test_png_without_a_renderer_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError) as caught:
        draw(blog_pipeline(), format="png")
    assert "apt-get install graphviz" in str(caught.value) and "@mermaid-js/mermaid-cli" in str(caught.value)


def _program(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!{sys.executable}\n{body}", "utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_png_through_graphviz_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphviz is not installed here: a stand-in `dot` checks the arguments and answers PNG bytes."""
    _program(
        tmp_path,
        "dot",
        "import sys\nassert sys.argv[1:] == ['-Tpng'], sys.argv\n"
        f"sys.stdout.buffer.write({PNG_MAGIC!r} + sys.stdin.buffer.read())\n",
    )
    _program(tmp_path, "mmdc", "raise SystemExit('dot comes first')\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    data = draw(blog_pipeline(), format="png")
    assert data.startswith(PNG_MAGIC) and data[len(PNG_MAGIC) :].decode() == draw(blog_pipeline(), format="dot")


def test_png_through_the_mermaid_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No `dot`: the Mermaid CLI (a stand-in `mmdc` here) renders the Mermaid text from a file."""
    _program(
        tmp_path,
        "mmdc",
        "import sys\nargs = dict(zip(sys.argv[1::2], sys.argv[2::2]))\n"
        f"open(args['-o'], 'wb').write({PNG_MAGIC!r} + open(args['-i'], 'rb').read())\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path))
    data = draw(blog_pipeline(), format="png")
    assert data == PNG_MAGIC + draw(blog_pipeline()).encode()


def test_a_failing_renderer_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _program(tmp_path, "dot", "import sys\nsys.stderr.write('Error: syntax error in line 3')\nsys.exit(1)\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="dot could not draw the agent: Error: syntax error in line 3"):
        draw(blog_pipeline(), format="png")


def test_mcp_toolkit_is_drawn_from_its_listed_tools_without_the_server() -> None:
    pytest.importorskip("mcp.server.mcpserver", reason="the MCP demo server needs the official MCP SDK (test extra)")
    from plait.actions.mcp import MCPToolkit

    toolkit = MCPToolkit(sys.executable, [str(MCP_SERVER)], name="demo", tools=["add", "echo"])
    try:
        toolkit.close()  # the server is gone: the drawing must not start it again
        agent = FunctionCallingAgent(ScriptedLLM([]), [toolkit], name="calc")
        text = draw(agent)
        assert toolkit._connection.session is None
    finally:
        toolkit.close()
    lines = text.splitlines()
    title = "<b>demo</b><br/>MCP server<br/>Arithmetic, echo and failure tools for plait's tests."
    assert f'    k0[("{title}")]' in lines
    assert [line for line in lines if line.startswith("    k0 --> ")] == ["    k0 --> t0", "    k0 --> t1"]
    assert '    t0(["<b>add</b><br/>Add two integers."])' in lines
    assert "    class k0 mcp" in lines


def test_the_docs_picture_is_what_the_docs_example_prints(capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text("utf-8")
    section = page[page.index("## Drawing an agent tree") :]
    code = section[section.index("```python\n") + len("```python\n") : section.index("```\n\nIt prints")]
    picture = section[section.index("```mermaid\n") + len("```mermaid\n") :]
    exec(compile(code, "docs/agents.md", "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out == picture[: picture.index("```\n")] + "\n"  # print's newline after the text's
