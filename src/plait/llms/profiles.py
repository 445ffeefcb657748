"""Model profiles: what plait needs to know about a model family to talk to it right.

Open models differ in ways a chat API does not show: whether their server parses tool
calls, whether ``tool_choice='required'`` and parallel calls work, where their reasoning
("thinking") arrives and whether it must be sent back. `profile_for` matches a model name
(and, for a local GGUF file, its chat template) against a small table and returns the
family's `ModelProfile`; `GPTAPI` and `AsyncGPTAPI` take one (``profile=``) or match their
model name, and ``reasoning_replay=`` overrides the profile's replay policy.

Reasoning replay (``reasoning_replay``):

- ``'field'``: assistant turns that called tools carry their reasoning back, in the
  profile's `reasoning_field` (DeepSeek's and Kimi's thinking modes answer HTTP 400
  without it; Claude gets its signed ``thinking`` blocks back).
- ``'tags'``: those turns carry it inline, as ``<think>...</think>`` before the content.
- ``'drop'``: reasoning is never sent back (what most servers want; the default).

A server can decide it too: OpenRouter (matched from its URL, whatever the model) wants the
``reasoning_details`` of a tool-call turn passed back unchanged, so its profile replays those.

Example:
    ```python
    from plait.llms.profiles import profile_for

    profile = profile_for('deepseek-reasoner')
    assert (profile.family, profile.reasoning_field, profile.reasoning_replay) == (
        'deepseek', 'reasoning_content', 'field')
    assert profile_for('Qwen/Qwen3-8B').reasoning_replay == 'drop'
    assert profile_for('my-own-model').family == 'default'
    ```
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

from ..exceptions import UserError

__all__ = [
    "PROFILES",
    "REASONING_REPLAYS",
    "ModelProfile",
    "ReasoningReplay",
    "ThinkTags",
    "check_replay",
    "profile_for",
]

ReasoningReplay: TypeAlias = Literal["field", "tags", "drop"]
"""How reasoning goes back to the model in later requests (see the module docstring)."""

REASONING_REPLAYS: tuple[str, ...] = ("field", "tags", "drop")

ThinkTags: TypeAlias = Literal["off", "closed", "opened"]
"""How inline ``<think>`` tags in a reply's content are read: not at all, as blocks, or with
the block already opened by the prompt (the reply starts as reasoning)."""

_THINK_TAGS: tuple[str, ...] = ("off", "closed", "opened")


def check_replay(value: object) -> ReasoningReplay:
    """`value` as a `ReasoningReplay`.

    Raises:
        UserError: `value` is not one of ``'field'``, ``'tags'``, ``'drop'``.
    """
    if value == "field":
        return "field"
    if value == "tags":
        return "tags"
    if value == "drop":
        return "drop"
    raise UserError(f"reasoning_replay must be one of {REASONING_REPLAYS}, not {value!r}")


@dataclass(frozen=True)
class ModelProfile:
    """What plait assumes about one model family.

    Attributes:
        family: The family's name (``'deepseek'``, ``'qwen3'``... ``'default'``).
        tool_protocol: How tool calls travel: ``'native'`` (the server's ``tool_calls``), the
            name of a text format the model writes calls in, or ``'plait'`` (plait's own
            constrained protocol, for the embedded engine).
        supports_required_tool_choice: Whether ``tool_choice='required'`` (or one function)
            is accepted (DeepSeek's thinking mode refuses it).
        parallel_tool_calls: Whether the model makes several calls in one turn.
        reasoning_field: The message field reasoning is sent back in under ``'field'``
            replay (``'reasoning_content'``, ``'reasoning'``, ``'thinking'``), None when the
            family has none. Replies are read from every field whatever this says. Reasoning
            that came with ``reasoning_details`` sends those back instead, unchanged;
            ``'reasoning_details'`` here sends nothing else.
        reasoning_replay: ``'field'``, ``'tags'`` or ``'drop'`` (module docstring).
        think_tags: How inline ``<think>`` tags in the content are read: ``'closed'``
            (blocks anywhere), ``'opened'`` (the chat template opens the block, so the
            reply starts as reasoning up to ``</think>``: DeepSeek-R1 distills, QwQ, Qwen3
            thinking-2507), ``'off'`` (content kept as it is).
        stop_words: The family's end-of-turn markers, for engines that render the prompt
            themselves (an OpenAI-compatible server stops on them already; `GPTAPI` does
            not send them).
    """

    family: str = "default"
    tool_protocol: str = "native"
    supports_required_tool_choice: bool = True
    parallel_tool_calls: bool = True
    reasoning_field: str | None = None
    reasoning_replay: ReasoningReplay = "drop"
    think_tags: ThinkTags = "closed"
    stop_words: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_replay(self.reasoning_replay)
        if self.think_tags not in _THINK_TAGS:
            raise UserError(f"think_tags must be one of {_THINK_TAGS}, not {self.think_tags!r}")
        if self.reasoning_replay == "field" and not self.reasoning_field:
            raise UserError("reasoning_replay='field' needs a reasoning_field to send the reasoning in")

    def replace(self, **changes: Any) -> ModelProfile:
        """A copy with `changes` applied (checked as a new profile is)."""
        return dataclasses.replace(self, **changes)


_IM_END = ("<|im_end|>",)

PROFILES: dict[str, ModelProfile] = {
    "deepseek": ModelProfile(
        "deepseek",
        supports_required_tool_choice=False,
        reasoning_field="reasoning_content",
        reasoning_replay="field",
        stop_words=("<｜end▁of▁sentence｜>",),
    ),
    "qwen3": ModelProfile("qwen3", reasoning_field="reasoning_content", stop_words=_IM_END),
    "qwen2.5": ModelProfile("qwen2.5", stop_words=_IM_END),
    "internlm": ModelProfile(
        "internlm", reasoning_field="reasoning_content", stop_words=("<|im_end|>", "<|action_end|>")
    ),
    "glm": ModelProfile("glm", reasoning_field="reasoning_content", stop_words=("<|user|>", "<|observation|>")),
    "kimi": ModelProfile(
        "kimi", reasoning_field="reasoning_content", reasoning_replay="field", stop_words=("<|im_end|>",)
    ),
    "llama3": ModelProfile("llama3", parallel_tool_calls=False, stop_words=("<|eot_id|>", "<|eom_id|>")),
    "mistral": ModelProfile("mistral", stop_words=("</s>",)),
    "claude": ModelProfile("claude", reasoning_field="thinking", reasoning_replay="field", think_tags="off"),
    "openrouter": ModelProfile("openrouter", reasoning_field="reasoning_details", reasoning_replay="field"),
    "default": ModelProfile("default"),
}
"""The families plait knows, by name. Add one here and a pattern to `_PATTERNS` (docs/models.md)."""

_PATTERNS: tuple[tuple[re.Pattern[str], str, dict[str, object]], ...] = (
    # (pattern on the lower-cased name, family, fields that differ for this variant); first match wins
    (re.compile(r"deepseek.*r1.*distill|r1-distill"), "deepseek", {"think_tags": "opened", "reasoning_replay": "drop"}),
    (re.compile(r"deepseek"), "deepseek", {}),
    (re.compile(r"qwq"), "qwen3", {"think_tags": "opened"}),
    (re.compile(r"qwen-?3.*thinking"), "qwen3", {"think_tags": "opened"}),
    (re.compile(r"qwen-?3"), "qwen3", {}),
    (re.compile(r"qwen-?2\.5|qwen-?2(?![.\d])"), "qwen2.5", {}),
    (re.compile(r"internlm"), "internlm", {}),
    (re.compile(r"glm"), "glm", {}),
    (re.compile(r"kimi|moonshot"), "kimi", {}),
    (re.compile(r"llama[-_ ]?3|llama3"), "llama3", {}),
    (re.compile(r"mistral|mixtral|magistral|ministral|codestral"), "mistral", {}),
    (re.compile(r"claude"), "claude", {}),
)

_TEMPLATE_MARKS: tuple[tuple[str, str], ...] = (
    # what a GGUF's chat template holds -> its family, for local files named anything
    ("<｜Assistant｜>", "deepseek"),
    ("<|action_start|>", "internlm"),
    ("<think>", "qwen3"),
    ("<|im_start|>", "qwen2.5"),
    ("<|start_header_id|>", "llama3"),
    ("[INST]", "mistral"),
    ("[gMASK]", "glm"),
)


_SERVERS: tuple[tuple[str, str], ...] = (
    # a server's host (or a domain above it) -> the profile it needs, whatever the model
    ("openrouter.ai", "openrouter"),
)


def profile_for(model_name: str, template: str | None = None, server: str | None = None) -> ModelProfile:
    """The profile of the model called `model_name` (any spelling: ``'Qwen/Qwen3-8B'``, ``'qwen3:8b'``).

    Args:
        model_name: The model's name as the server knows it, or a local file's path.
        template: A local model's chat template (the GGUF's ``tokenizer.chat_template``),
            read when the name says nothing.
        server: The URL of the server the model is reached through: a server that decides
            how reasoning goes back (OpenRouter, ``reasoning_details``) gets its profile.

    Returns:
        The server's profile, else the first matching family's (with the variant's
        differences), else the ``'default'`` profile.
    """
    host = (urlsplit(server).hostname or "") if server else ""
    for domain, profile_name in _SERVERS:
        if host == domain or host.endswith("." + domain):
            return PROFILES[profile_name]
    name = model_name.lower()
    for pattern, family, changes in _PATTERNS:
        if pattern.search(name):
            profile = PROFILES[family]
            return profile.replace(**changes) if changes else profile
    if template:
        for mark, family in _TEMPLATE_MARKS:
            if mark in template:
                return PROFILES[family]
    return PROFILES["default"]
