"""plait's web demo: chat with an agent in the browser (a streamlit app).

Start it with ``plait web`` (or ``streamlit run`` on this file). The sidebar picks the
model (the embedded local model, or any OpenAI-compatible server by base URL and model
name), the agent type, the plugins, the code interpreter, and the prompts, and shows a picture of
the agent (`plait.draw`: its tools, approval gates marked) once it is built; the chat pane
streams each answer with its tool calls. Every browser session has its own agent.
"""

from __future__ import annotations

import os

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from plait.agents.drawing import draw
from plait.llms.catalogue import DEFAULT_MODEL
from plait.web.events import ChatEntry
from plait.web.render import LiveEntry, question_form, render_entry
from plait.web.session import ChatSession
from plait.web.settings import (
    AGENT_KINDS,
    Preset,
    Settings,
    default_prompts,
    import_tool_modules,
    plugin_choices,
    preset,
    server_url,
)

__all__ = ["agent_picture", "main", "sidebar"]

_SESSION_KEY = "plait_chat_session"
_SOURCES = ("Embedded local model", "OpenAI-compatible server")
_LANGUAGES = {"en": "English", "cn": "中文"}


def get_session() -> ChatSession:
    """This browser session's `ChatSession` (created on its first run)."""
    if _SESSION_KEY not in st.session_state:
        st.session_state[_SESSION_KEY] = ChatSession()
    session: ChatSession = st.session_state[_SESSION_KEY]
    return session


def _model_settings(pre: Preset) -> dict[str, str]:
    sb = st.sidebar
    sb.header("Model")
    source: object = sb.radio("Model source", _SOURCES, index=1 if pre["api_base"] else 0, key="model_source")
    if source == _SOURCES[1]:
        return {
            "api_base": sb.text_input("Base URL", value=pre["api_base"] or "http://127.0.0.1:23333/v1", key="api_base"),
            "model": sb.text_input("Model name", value=pre["model"] or "internlm2_5-7b-chat", key="model_name"),
            "api_key": sb.text_input("API key (optional)", type="password", key="api_key"),
        }
    gguf = sb.text_input(
        "Model: a catalogue name or a GGUF file (optional)",
        value="" if pre["api_base"] else pre["model"],
        placeholder=f"default: {DEFAULT_MODEL}",
        key="gguf_path",
    )
    sb.caption("Runs in this process with llama.cpp; no server, no key. `plait models` lists the catalogue.")
    return {"api_base": "", "model": gguf, "api_key": ""}


def _prompts(agent: str) -> dict[str, str]:
    sb = st.sidebar
    sb.header("Prompts")
    language = (
        sb.radio("Prompt language", list(_LANGUAGES), format_func=_LANGUAGES.__getitem__, horizontal=True) or "en"
    )
    defaults = default_prompts(agent, language)
    prompts = {"plugin": "", "interpreter": ""}
    label = "System prompt (template)" if agent == "react" else "System prompt"
    prompts["system"] = sb.text_area(label, value=defaults["system"], height=150, key=f"system_{agent}_{language}")
    if agent == "internlm2":
        prompts["plugin"] = sb.text_area(
            "Plugin prompt", value=defaults["plugin"], height=150, key=f"plugin_{agent}_{language}"
        )
        prompts["interpreter"] = sb.text_area(
            "Interpreter prompt", value=defaults["interpreter"], height=150, key=f"interpreter_{agent}_{language}"
        )
    elif agent == "react":
        sb.caption("{action_info}, {tool_names} and {output_format} are filled in on every call.")
    else:
        sb.caption("Tools reach the model as native tool schemas, so this agent has no plugin prompt.")
    return prompts


def _uploads(session: ChatSession) -> None:
    sb = st.sidebar
    sb.header("Files")
    files = sb.file_uploader(
        "Upload files for the agent", accept_multiple_files=True, key=f"uploads_{session.upload_epoch}"
    )
    for upload in files or []:
        session.save_upload(upload.file_id, upload.name, upload.getvalue())
    if session.uploads:
        names = ", ".join(os.path.basename(path) for path in session.uploads.values())
        sb.caption(f"Saved to the session folder; sent with your next message: {names}")


def sidebar(session: ChatSession) -> Settings:
    """Draw the sidebar; return the settings it shows."""
    pre = preset()
    for problem in import_tool_modules(os.environ.get("PLAIT_WEB_TOOL_MODULES", "")):
        st.sidebar.warning(problem)
    model = _model_settings(pre)
    sb = st.sidebar
    sb.header("Agent")
    kinds = list(AGENT_KINDS)
    agent = (
        sb.selectbox(
            "Agent type", kinds, index=kinds.index(pre["agent"]), format_func=AGENT_KINDS.__getitem__, key="agent"
        )
        or kinds[0]
    )
    choices = plugin_choices()
    plugins = sb.multiselect("Plugins", choices, default=[p for p in pre["plugins"] if p in choices], key="plugins")
    mcp = sb.text_area(
        "MCP servers",
        value=pre["mcp"],
        placeholder="one per line: a command (npx -y @modelcontextprotocol/server-filesystem .) or an http(s) URL",
        height=68,
        key="mcp_servers",
    )
    interpreter = sb.toggle("Code interpreter", key="interpreter")
    max_turn = int(sb.number_input("Max tool rounds", min_value=1, max_value=20, value=4, key="max_turn"))
    with sb.expander("Generation"):
        max_new_tokens = int(st.number_input("Max new tokens", 16, 8192, 512, step=64, key="max_new_tokens"))
        temperature = float(st.slider("Temperature", 0.0, 2.0, 0.0, step=0.1, key="temperature"))
    prompts = _prompts(agent)
    _uploads(session)
    sb.divider()
    if sb.button("Clear conversation", key="clear", width="stretch"):
        session.clear()
    sb.caption(f"Session {session.session_id[:8]}")
    return Settings(
        api_base=server_url(model["api_base"]),
        model=model["model"].strip(),
        api_key=model["api_key"].strip(),
        agent=agent,
        plugins=tuple(plugins),
        interpreter=bool(interpreter),
        mcp_servers=tuple(line.strip() for line in (mcp or "").splitlines() if line.strip()),
        system_prompt=prompts["system"],
        plugin_prompt=prompts["plugin"],
        interpreter_prompt=prompts["interpreter"],
        max_turn=max_turn,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
    )


def _stream(session: ChatSession, entry: ChatEntry) -> None:
    """Draw the running answer, following its events until it ends."""
    live = LiveEntry(entry)
    turn = session.turn
    if turn is None:
        return
    for event in turn.events():
        session.receive(event)
        live.update()


def main() -> None:
    """The page: sidebar, transcript, running answer, chat input."""
    st.set_page_config(page_title="plait agent chat", page_icon="🧩", layout="wide")
    session = get_session()
    prompt = st.chat_input("Ask the agent…", key="chat_input")
    if prompt:
        session.submit(prompt)
    settings = sidebar(session)
    picture = st.sidebar.expander("Agent tree", icon=":material/account_tree:").empty()
    agent_picture(picture, session, settings)
    st.title("plait agent chat")
    source = settings.api_base or f"embedded local model {settings.model or DEFAULT_MODEL}"
    st.caption(f"{AGENT_KINDS[settings.agent]} · {source}")
    running = session.turn is not None
    shown = session.transcript[:-1] if running else session.transcript
    for entry in shown:
        render_entry(entry)
    if running:
        _stream(session, session.transcript[-1])
    while session.queued:
        text, files = session.queued.pop(0)
        session.send(text, files, settings)
        agent_picture(picture, session, settings)  # the agent is built (or rebuilt) by the first message
        render_entry(session.transcript[-2])
        _stream(session, session.transcript[-1])
    _approvals(session)


def agent_picture(slot: DeltaGenerator, session: ChatSession, settings: Settings) -> None:
    """Draw the session's agent tree into `slot` (`plait.draw` as Graphviz, laid out in the browser)."""
    with slot.container():
        if session.agent is None:
            st.caption("The agent is built, and drawn here, when you send your first message.")
            return
        st.graphviz_chart(draw(session.agent, format="dot", direction="LR"), width="stretch")
        if settings != session.settings:
            st.caption("Changed settings apply to the agent with your next message.")
        st.caption("As Mermaid (for docs, issues, any Mermaid viewer):")
        st.code(draw(session.agent), language="text", height=120)


def _approvals(session: ChatSession) -> None:
    """Approve / Reject buttons for the tool calls the last answer waits on; the run goes on once all are decided."""
    block = session.pending_approval()
    if block is None:
        return
    for call in block.waiting:
        if call.question is not None:  # a running call asks something (an MCP server's elicitation)
            answer = question_form(call)
            if answer is not None:
                session.decide(call.id, answer)
                st.rerun()
            continue
        approve, reject = st.columns(2)
        decision = None
        if approve.button(f"Approve {call.name}", key=f"approve_{call.id}", type="primary"):
            decision = True
        if reject.button(f"Reject {call.name}", key=f"reject_{call.id}"):
            decision = False
        if decision is not None:
            session.decide(call.id, decision)  # the last decision starts the run again
            st.rerun()


if __name__ == "__main__":
    main()
