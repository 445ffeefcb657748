"""The web demo's page logic, run headless by streamlit's AppTest against a fake model server."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from _support import mcp_demo_command, one_tool_round
from plait.testing.fake_openai import HTTPFault, Reply
from plait.web import APP_PATH
from plait.web.session import ChatSession

AppTest = pytest.importorskip("streamlit.testing.v1", reason="the web demo needs the 'web' extra").AppTest

INTERNLM2_CALL = (
    'Let me compute.<|action_start|><|plugin|>\n{"name": "Calculator", "parameters": {"expression": "6*7"}}'
    "<|action_end|>\n"
)


def open_app(server: Any = None, agent: str | None = None) -> AppTest:
    """The app, run once, pointed at `server` (when given) through the sidebar."""
    at = AppTest.from_file(APP_PATH, default_timeout=60)
    at.run()
    assert not at.exception
    if server is not None:
        at.radio(key="model_source").set_value("OpenAI-compatible server").run()
        at.text_input(key="api_base").set_value(server.base_url).run()
        at.text_input(key="model_name").set_value("fake-model").run()
    if agent is not None:
        at.selectbox(key="agent").set_value(agent).run()
    return at


def send(at: AppTest, text: str) -> AppTest:
    at.chat_input(key="chat_input").set_value(text).run()
    assert not at.exception, at.exception
    return at


def session_of(at: AppTest) -> ChatSession:
    session = at.session_state["plait_chat_session"]
    assert isinstance(session, ChatSession)
    return session


def status_labels(at: AppTest) -> list[str]:
    return [status.label for status in at.status]


def test_function_calling_answer_renders_tool_call_and_result(web_env: Path, fake_model: Any) -> None:
    server = fake_model()
    at = send(open_app(server), "What is 37 * 91?")
    assert status_labels(at) == ["Tool call: Calculator"]
    codes = [code.value for code in at.status[0].code]
    assert '"expression": "37 * 91"' in codes[0] and codes[1] == "3367"
    answer = at.chat_message[1].markdown[-1].value
    assert answer.startswith("The tool says 3367.")
    assert [m.name for m in at.chat_message] == ["user", "assistant"]
    # the model got the tool schema and the tool's result
    assert server.requests[0]["tools"][0]["function"]["name"] == "Calculator"
    assert server.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_0", "content": "3367"}


def test_embedded_model_is_the_default_source(web_env: Path) -> None:
    at = AppTest.from_file(APP_PATH, default_timeout=60).run()
    assert at.radio(key="model_source").value == "Embedded local model"
    assert at.selectbox(key="agent").value == "function_calling"
    assert "embedded local model smollm2-135m" in at.caption[0].value  # says which model


def test_a_preset_catalogue_model_is_shown_in_the_field_and_caption(
    web_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_WEB_MODEL", "qwen2.5-coder-0.5b")  # what `plait web` presets: the best installed
    at = AppTest.from_file(APP_PATH, default_timeout=60).run()
    assert at.text_input(key="gguf_path").value == "qwen2.5-coder-0.5b"
    assert "embedded local model qwen2.5-coder-0.5b" in at.caption[0].value


def test_server_preset_from_environment(web_env: Path, monkeypatch: pytest.MonkeyPatch, fake_model: Any) -> None:
    server = fake_model()
    monkeypatch.setenv("PLAIT_WEB_API_BASE", server.base_url)
    monkeypatch.setenv("PLAIT_WEB_MODEL", "served-name")
    monkeypatch.setenv("PLAIT_WEB_AGENT", "react")
    at = AppTest.from_file(APP_PATH, default_timeout=60).run()
    assert at.radio(key="model_source").value == "OpenAI-compatible server"
    assert at.text_input(key="api_base").value == server.base_url
    assert at.text_input(key="model_name").value == "served-name"
    assert at.selectbox(key="agent").value == "react"


def test_edited_internlm2_prompts_reach_the_model(web_env: Path, fake_model: Any) -> None:
    server = fake_model([INTERNLM2_CALL, "It is 42."])
    at = open_app(server, agent="internlm2")
    at.text_area(key="system_internlm2_en").set_value("You are PIRATE-BOT, arr.").run()
    at.text_area(key="plugin_internlm2_en").set_value("SHIP TOOLS:\n{prompt}\nHOIST WITH {begin}<json>{end}").run()
    at.toggle(key="interpreter").set_value(True).run()
    at.text_area(key="interpreter_internlm2_en").set_value("CANNON CODE GOES IN {begin}...{end}").run()
    send(at, "What is 6 * 7?")
    system = server.requests[0]["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are PIRATE-BOT, arr.")
    assert "SHIP TOOLS:" in system["content"] and '"name": "Calculator"' in system["content"]
    assert "HOIST WITH <|action_start|><|plugin|>\n<json><|action_end|>" in system["content"]
    assert "CANNON CODE GOES IN <|action_start|><|interpreter|>\n...<|action_end|>" in system["content"]
    assert status_labels(at) == ["Tool call: Calculator"]
    assert at.chat_message[1].markdown[0].value == "Let me compute."
    assert at.chat_message[1].markdown[-1].value == "It is 42."
    # the conversation goes on in the old API's form: the next request carries the tool steps
    server.push("Still 42.")
    send(at, "And again?")
    roles = [m["role"] for m in server.requests[-1]["messages"]]
    assert roles[1:] == ["user", "assistant", "system", "assistant", "user"]
    assert session_of(at).history[-1] == {"role": "language", "content": "Still 42."}


def test_chinese_prompts_are_offered(web_env: Path) -> None:
    at = open_app(agent="internlm2")
    language = next(r for r in at.radio if r.label == "Prompt language")
    language.set_value("cn").run()
    assert "工具" in at.text_area(key="plugin_internlm2_cn").value


def test_edited_react_template_reaches_the_model(web_env: Path, fake_model: Any) -> None:
    server = fake_model(["Thought: easy\nFinal Answer: four"])
    at = open_app(server, agent="react")
    at.text_area(key="system_react_en").set_value("CUSTOM REACT. Tools: {tool_names}\n{action_info}").run()
    send(at, "two plus two?")
    system = server.requests[0]["messages"][0]["content"]
    assert system.startswith("CUSTOM REACT. Tools: Calculator\n")
    assert at.chat_message[1].markdown[-1].value == "four"


def test_edited_system_prompt_of_function_calling_agent(web_env: Path, fake_model: Any) -> None:
    server = fake_model(["fine"])
    at = open_app(server)
    at.text_area(key="system_function_calling_en").set_value("Only speak in haiku.").run()
    send(at, "hello")
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "Only speak in haiku."}


def test_react_template_error_is_shown_readably(web_env: Path, fake_model: Any) -> None:
    server = fake_model(["unused"])
    at = open_app(server, agent="react")
    at.text_area(key="system_react_en").set_value("Broken {nonsense}").run()
    send(at, "hi")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "could not set up the agent" in errors[0] and "nonsense" in errors[0]
    assert server.requests == []


def test_server_error_is_shown_readably(web_env: Path, fake_model: Any) -> None:
    server = fake_model([HTTPFault(500), HTTPFault(500), HTTPFault(500)])
    at = send(open_app(server), "hi")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "500" in errors[0] and "LLM" in errors[0]
    assert session_of(at).turn is None


def test_unreachable_server_is_shown_readably(web_env: Path, fake_model: Any) -> None:
    server = fake_model()
    at = open_app(server)
    at.text_input(key="api_base").set_value("http://127.0.0.1:9/v1").run()
    send(at, "hi")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "127.0.0.1:9" in errors[0]


def test_unavailable_plugin_is_reported_and_left_out(web_env: Path, fake_model: Any) -> None:
    server = fake_model(["answered without it"])
    at = open_app(server)
    at.multiselect(key="plugins").set_value(["Calculator", "GoogleSearch"]).run()
    send(at, "search something")
    warnings = [w.value for w in at.warning]
    assert any("GoogleSearch is not available" in w for w in warnings)
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["Calculator"]
    assert at.chat_message[1].markdown[-1].value == "answered without it"


def test_uploaded_file_is_saved_and_mentioned_to_the_agent(web_env: Path, fake_model: Any) -> None:
    server = fake_model(["I see the file."])
    at = open_app(server)
    at.file_uploader(key="uploads_0").upload("notes.txt", b"alpha beta", "text/plain")
    at.run()
    session = session_of(at)
    (saved,) = session.uploads.values()
    assert Path(saved).read_bytes() == b"alpha beta"
    assert Path(saved).parent == web_env / session.session_id
    send(at, "Summarise my file")
    sent = server.requests[0]["messages"][-1]["content"]
    assert sent.startswith("Summarise my file") and saved in sent
    assert "Attached: notes.txt" in [c.value for c in at.chat_message[0].caption]
    assert session.uploads == {} and session.upload_epoch == 1
    assert at.file_uploader(key="uploads_1") is not None


def test_clear_conversation_forgets_messages_memory_and_session(web_env: Path, fake_model: Any) -> None:
    server = fake_model(["first", "second"])
    at = send(open_app(server), "one")
    old = session_of(at).session_id
    at.button(key="clear").click().run()
    assert len(at.chat_message) == 0
    assert session_of(at).session_id != old
    assert not (web_env / old).exists()
    send(at, "two")
    assert [m["content"] for m in server.requests[1]["messages"][1:]] == ["two"]


def test_changing_settings_keeps_memory_of_the_same_agent_type(web_env: Path, fake_model: Any) -> None:
    server = fake_model(["first", "second"])
    at = send(open_app(server), "one")
    at.text_area(key="system_function_calling_en").set_value("New rules.").run()
    send(at, "two")
    messages = server.requests[1]["messages"]
    assert messages[0]["content"] == "New rules."
    assert [m["content"] for m in messages[1:]] == ["one", "first", "two"]


def test_changing_agent_type_says_the_new_agent_starts_fresh(web_env: Path, fake_model: Any) -> None:
    server = fake_model(["first", "Thought: ok\nFinal Answer: second"])
    at = send(open_app(server), "one")
    at.selectbox(key="agent").set_value("react").run()
    send(at, "two")
    assert any("does not see the messages above" in w.value for w in at.warning)


def test_user_registered_tools_are_offered(web_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "weather_tool.py"
    module.write_text(
        "from plait.actions import BaseAction, tool_api\n\n"
        "class WeatherQueryWeb(BaseAction):\n"
        '    """Weather for a city."""\n\n'
        "    @tool_api\n"
        "    def run(self, query: str) -> str:\n"
        '        """Look up the weather.\n\n        Args:\n            query: the city\n        """\n'
        "        return f'sunny in {query}'\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("PLAIT_WEB_TOOL_MODULES", f"{module}{os.pathsep}no_such_module_xyz")
    at = AppTest.from_file(APP_PATH, default_timeout=60).run()
    options = at.multiselect(key="plugins").options
    assert "WeatherQueryWeb" in options and "Calculator" in options
    assert "IPythonInterpreter" not in options and "AsyncCalculator" not in options
    assert any("no_such_module_xyz" in w.value for w in at.sidebar.warning)


def test_two_app_sessions_are_isolated(web_env: Path, fake_model: Any) -> None:
    server = fake_model()
    first, second = open_app(server), open_app(server)
    send(first, "What is 2 * 3?")
    send(second, "What is 5 * 5?")
    a, b = session_of(first), session_of(second)
    assert a.session_id != b.session_id and a.agent is not b.agent
    assert len(first.chat_message) == len(second.chat_message) == 2
    assert "6" in first.status[0].code[1].value and "25" in second.status[0].code[1].value
    assert a.agent.memory.get_memory(b.session_id) == []


def test_interpreter_code_output_and_image_are_rendered(web_env: Path, fake_model: Any) -> None:
    pytest.importorskip("jupyter_client")
    code = (
        "import struct, zlib\n"
        "def chunk(kind, data):\n"
        "    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))\n"
        "rows = b''.join(b'\\x00' + b'\\xff\\x00\\x00' * 4 for _ in range(4))\n"
        "png = b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 4, 4, 8, 2, 0, 0, 0))"
        " + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b'')\n"
        "from IPython.display import Image, display\n"
        "display(Image(data=png))\n"
        "print('drawn')\n"
    )
    server = fake_model([Reply(tool_calls=[("IPythonInterpreter", {"command": code})]), "Here is a red square."])
    at = open_app(server)
    at.toggle(key="interpreter").set_value(True).run()
    send(at, "draw")
    assert status_labels(at) == ["Code interpreter"]
    status = at.status[0]
    assert status.code[0].language == "python" and "display(Image(data=png))" in status.code[0].value
    assert status.code[1].value == "drawn"
    images = status.get("image")
    assert len(images) == 1
    session = session_of(at)
    saved = [p for p in os.listdir(session.work_dir) if p.endswith(".png")]
    assert len(saved) == 1
    session.agent.executor["IPythonInterpreter"].shutdown()


def test_server_address_typed_as_in_the_seeds(web_env: Path, fake_model: Any) -> None:
    """Seeds 001/002 type the server as ``127.0.0.1:23333``: no scheme, no /v1."""
    server = fake_model()
    address = server.base_url.removeprefix("http://").removesuffix("/v1")
    at = AppTest.from_file(APP_PATH, default_timeout=60).run()
    at.radio(key="model_source").set_value("OpenAI-compatible server").run()
    at.text_input(key="api_base").set_value(address).run()
    at = send(at, "What is 37 * 91?")
    assert at.chat_message[1].markdown[-1].value.startswith("The tool says 3367.")
    assert f"http://{address}" in at.caption[0].value


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("script", "plugin"),
    [("internlm2_agent_web_demo.py", "Calculator"), ("internlm2_weather_web_demo.py", "WeatherQuery")],
)
def test_seed_demo_scripts_start_the_app(
    web_env: Path, monkeypatch: pytest.MonkeyPatch, script: str, plugin: str
) -> None:
    """``streamlit run examples/internlm2_agent_web_demo.py`` (seeds 001/002) opens the InternLM2 agent."""
    for name in ("PLAIT_WEB_AGENT", "PLAIT_WEB_TOOLS", "PLAIT_WEB_TOOL_MODULES"):
        monkeypatch.delenv(name, raising=False)  # the scripts set them; undone after the test
    monkeypatch.setenv("WEATHER_API_KEY", "test-key")
    at = AppTest.from_file(str(EXAMPLES / script), default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="agent").value == "internlm2"
    assert plugin in at.multiselect(key="plugins").value
    assert not at.sidebar.warning


def test_mcp_server_tools_are_offered_to_the_agent(web_env: Path, fake_model: Any) -> None:
    demo = mcp_demo_command()
    server = fake_model(handler=one_tool_round("demo_server__add", {"a": 20, "b": 22}, "The server says {}."))
    at = open_app(server)
    at.text_area(key="mcp_servers").set_value(demo).run()
    at = send(at, "add please")
    assert status_labels(at) == ["Tool call: demo_server.add"]
    assert at.chat_message[1].markdown[-1].value == "The server says 42."
    offered = [tool["function"]["name"] for tool in server.requests[0]["tools"]]
    assert "demo_server__echo" in offered and "Calculator" in offered
    session_of(at).clear()


def test_an_mcp_server_that_cannot_start_is_reported(web_env: Path, fake_model: Any, tmp_path: Path) -> None:
    server = fake_model(["answered without it"])
    at = open_app(server)
    at.text_area(key="mcp_servers").set_value(str(tmp_path / "no-such-server")).run()
    send(at, "hello")
    assert any("could not start the MCP server" in w.value for w in at.warning)
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["Calculator"]
    assert at.chat_message[1].markdown[-1].value == "answered without it"


def test_mcp_servers_survive_agent_rebuilds_and_restart_on_clear(web_env: Path, fake_model: Any) -> None:
    demo = mcp_demo_command()
    at = open_app(fake_model(handler=one_tool_round("demo_server__count", {}, "count {}")))
    at.text_area(key="mcp_servers").set_value(demo).run()
    at = send(at, "count")
    assert at.chat_message[-1].markdown[-1].value == "count 1"
    at.text_area(key="system_function_calling_en").set_value("Count things.").run()  # the agent is rebuilt
    at = send(at, "count")
    assert at.chat_message[-1].markdown[-1].value == "count 2"  # the same server process
    session_of(at).clear()
    at = send(at.run(), "count")
    assert at.chat_message[-1].markdown[-1].value == "count 1"  # cleared: a fresh server
    session_of(at).clear()


def test_sidebar_draws_the_agent_once_it_is_built(web_env: Path, fake_model: Any) -> None:
    at = open_app(fake_model())
    (tree,) = [e for e in at.sidebar.expander if e.label == "Agent tree"]
    assert [c.value for c in tree.caption] == ["The agent is built, and drawn here, when you send your first message."]
    send(at, "What is 37 * 91?")
    (tree,) = [e for e in at.sidebar.expander if e.label == "Agent tree"]
    (chart,) = tree.get("graphviz_chart")
    dot = chart.proto.spec
    assert dot.startswith("digraph agents {") and 'label="Calculator' in dot and "FunctionCallingAgent" in dot
    assert tree.code[0].value.startswith("flowchart TD") and "<b>Calculator</b>" in tree.code[0].value
    at.multiselect(key="plugins").set_value([]).run()  # not rebuilt until the next message
    (tree,) = [e for e in at.sidebar.expander if e.label == "Agent tree"]
    assert "Changed settings apply to the agent with your next message." in [c.value for c in tree.caption]


def test_an_mcp_servers_question_is_a_form_and_the_answer_resumes_the_call(
    web_env: Path, fake_model: Any, tmp_path: Path
) -> None:
    """Issue 38 item 3: the server's elicitation pauses the answer; the form's answer goes on with the call, once."""
    bookings = tmp_path / "bookings.txt"
    asking = Path(__file__).resolve().parents[1] / "actions" / "mcp" / "asking_server.py"
    mcp_demo_command()  # skips without the SDK
    server = fake_model(handler=one_tool_round("asking_server__book", {"table": "7"}, "The server says {}."))
    at = open_app(server)
    at.text_area(key="mcp_servers").set_value(f"env BOOKINGS={bookings} {sys.executable} {asking}").run()
    at = send(at, "book table 7")
    assert any("How many guests at table 7?" in m.value for m in at.markdown)
    assert not bookings.exists()
    (guests,) = [n for n in at.number_input if n.key.endswith("_guests")]
    guests.set_value(3)
    (vegetarian,) = [c for c in at.checkbox if c.key.endswith("_vegetarian")]
    vegetarian.check()
    next(b for b in at.button if b.label == "Send answer").click().run()
    assert not at.exception, at.exception
    assert at.chat_message[-1].markdown[-1].value == 'The server says accept {"guests":3,"vegetarian":true}.'
    assert bookings.read_text().splitlines() == ['7: accept {"guests":3,"vegetarian":true}']
    session_of(at).clear()
