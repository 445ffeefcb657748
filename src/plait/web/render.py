"""Drawing transcript entries with streamlit: text, thinking, tool calls (arguments, results, code, images), notices.

`render_entry` draws a finished entry; `LiveEntry` draws one that is still being built,
redrawing only the blocks that changed, so streamed text updates in place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Literal

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from .events import ApprovalBlock, Block, ChatEntry, NoticeBlock, TextBlock, ThinkingBlock, ToolBlock

__all__ = ["AVATARS", "LiveEntry", "render_block", "render_entry", "tool_label"]

AVATARS = {"user": ":material/person:", "assistant": ":material/smart_toy:"}
_CURSOR = " ▌"


def tool_label(block: ToolBlock) -> str:
    """The heading of a tool block: what was called and how it went."""
    what = "Code interpreter" if block.kind == "interpreter" else f"Tool call: {block.name}"
    if block.writing:
        return f"{what} (writing…)"
    if not block.done:
        return f"{what} (running…)"
    return f"{what} (failed)" if block.error else what


def _arguments(block: ToolBlock) -> None:
    args = block.arguments
    if block.writing:  # the JSON the model is writing, as it grows
        st.caption("Arguments")
        st.code(str(args) or " ", language="json")
    elif block.kind == "interpreter":
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
