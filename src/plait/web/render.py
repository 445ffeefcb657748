"""Drawing transcript entries with streamlit: text, thinking, tool calls (arguments, results, code, images), notices.

`render_entry` draws a finished entry; `LiveEntry` draws one that is still being built,
redrawing only the blocks that changed, so streamed text updates in place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ..schema import PendingCall
from .events import ApprovalBlock, Block, ChatEntry, NoticeBlock, TextBlock, ThinkingBlock, ToolBlock

__all__ = ["AVATARS", "LiveEntry", "render_block", "render_entry", "tool_label"]

AVATARS = {"user": ":material/person:", "assistant": ":material/smart_toy:"}
_CURSOR = " ▌"


def tool_label(block: ToolBlock) -> str:
    """The heading of a tool block: what was called and how it went."""
    what = "Code interpreter" if block.kind == "interpreter" else f"Tool call: {block.name}"
    if not block.done:
        return f"{what} (running…)"
    return f"{what} (failed)" if block.error else what


def _arguments(block: ToolBlock) -> None:
    args = block.arguments
    if block.kind == "interpreter":
        code = args.get("command", "") if isinstance(args, Mapping) else args
        st.code(str(code), language="python")
    elif isinstance(args, (Mapping, list)):
        st.caption("Arguments")
        st.code(json.dumps(args, ensure_ascii=False, indent=2, default=str), language="json")
    elif args is not None:
        st.caption("Arguments")
        st.code(str(args), language="text")


def _result(block: ToolBlock) -> None:
    if not block.done:
        return
    st.caption("Output" if block.kind == "interpreter" else "Result")
    for item in block.items or ():
        kind, content = item.get("type", "text"), item.get("content", "")
        if kind == "image" and isinstance(content, str) and os.path.isfile(content):
            st.image(content)
        elif kind == "text":
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
            st.code(text or "(no output)", language="text")
        else:
            st.code(f"[{kind}] {content}", language="text")
    if block.error:
        st.error(block.error)


def render_block(block: Block, cursor: bool = False) -> None:
    """Draw one block; `cursor` marks text that is still streaming."""
    if isinstance(block, TextBlock):
        st.markdown(block.text + (_CURSOR if cursor else ""))
    elif isinstance(block, ThinkingBlock):
        with st.expander("Thinking", expanded=False, icon=":material/psychology:"):
            st.markdown(f"*{block.text.strip()}*" + (_CURSOR if cursor else ""))
    elif isinstance(block, NoticeBlock):
        if block.level == "error":
            st.error(block.message, icon="⚠️")
        else:
            st.warning(block.message)
    elif isinstance(block, ApprovalBlock):
        for call in block.calls:
            decided = block.decisions.get(call.id)
            if call.question is not None:
                asker = call.question.get("server") or call.name
                st.markdown(f"**{asker}** asks, while **{call.name}** runs: {call.question.get('message', '')}")
                what = "waits for your answer" if decided is None else _ANSWERED.get(str(decided), "answered")
            else:
                what = "waits for your approval" if decided is None else ("approved" if decided else "refused")
            st.markdown(f"**{call.name}** {what}")
            st.code(json.dumps(call.arguments, ensure_ascii=False, indent=2, default=str), language="json")
    elif isinstance(block, ToolBlock):
        state: Literal["running", "complete", "error"] = (
            "running" if not block.done else ("error" if block.error else "complete")
        )
        with st.status(tool_label(block), state=state, expanded=True):
            _arguments(block)
            _result(block)


_ANSWERED = {"decline": "declined to answer", "cancel": "cancelled the question"}


def question_form(call: PendingCall) -> str | dict[str, Any] | None:
    """A form for the question a running call asks (`PendingCall.question`); the answer once submitted.

    One input per field of the requested schema (a number, a checkbox, a choice, text);
    "Send answer" accepts with the fields, "Decline" and "Cancel" answer so. None until submitted.
    """
    question = call.question or {}
    schema = question.get("requested_schema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    with st.form(key=f"question_{call.id}"):
        for name, spec in (schema.get("properties") or {}).items():
            label = str(spec.get("title") or name) + ("" if name in required else " (optional)")
            key, kind, default = f"question_{call.id}_{name}", spec.get("type", "string"), spec.get("default")
            options = spec.get("enum") or (spec.get("items") or {}).get("enum")
            value: Any
            if kind == "array":
                value = st.multiselect(label, options or [], default=default or [], key=key)
            elif options:
                value = st.selectbox(label, options, key=key)
            elif kind == "boolean":
                value = st.checkbox(label, value=bool(default), key=key)
            elif kind in ("integer", "number"):
                number = int if kind == "integer" else float
                value = st.number_input(label, value=number(default or 0), step=number(1), key=key)
            else:
                value = st.text_input(label, value=str(default or ""), key=key)
                if not value and name not in required:
                    continue
            content[name] = value
        send, decline, cancel = st.columns(3)
        answer: str | dict[str, Any] | None = None
        if send.form_submit_button("Send answer", type="primary"):
            answer = {"action": "accept", "content": content}
        if decline.form_submit_button("Decline"):
            answer = "decline"
        if cancel.form_submit_button("Cancel"):
            answer = "cancel"
    return answer


def render_entry(entry: ChatEntry) -> None:
    """Draw a transcript entry as a chat message."""
    with st.chat_message(entry.role, avatar=AVATARS.get(entry.role)):
        for block in entry.blocks:
            render_block(block)
        if entry.files:
            st.caption("Attached: " + ", ".join(entry.files))


class LiveEntry:
    """A chat message drawn while its entry grows: one placeholder per block, redrawn when it changes."""

    def __init__(self, entry: ChatEntry) -> None:
        self.entry = entry
        self._message = st.chat_message(entry.role, avatar=AVATARS.get(entry.role))
        with self._message:
            self._blocks = st.container()
            self._waiting = st.empty()  # below the blocks: shown while the agent works with nothing streaming
        self._slots: list[DeltaGenerator] = []
        self._shown: list[str] = []
        self.update()

    def update(self) -> None:
        """Redraw the blocks that changed since the last call."""
        entry = self.entry
        last = entry.blocks[-1] if entry.blocks else None
        if not entry.done and not isinstance(last, (TextBlock, ThinkingBlock)):
            self._waiting.caption("Working…" if entry.blocks else "Thinking…")  # a tool runs, or the model is asked
        else:
            self._waiting.empty()
        for index, block in enumerate(entry.blocks):
            if index == len(self._slots):
                with self._blocks:
                    self._slots.append(st.empty())
                self._shown.append("")
            cursor = not entry.done and index == len(entry.blocks) - 1 and isinstance(block, (TextBlock, ThinkingBlock))
            signature = f"{cursor}{block!r}"
            if signature != self._shown[index]:
                with self._slots[index].container():
                    render_block(block, cursor=cursor)
                self._shown[index] = signature
