"""Prompts of `plait.agents.ReAct`, in English and Chinese.

Placeholders filled on every call: ``{action_info}`` (one JSON description per tool),
``{tool_names}`` (comma-separated) and, in the JSON variant, ``{output_format}`` (the JSON
formats from the output parser). Literal braces are doubled.
"""

from __future__ import annotations

__all__ = [
    "REACT_FORCE_JSON_CN",
    "REACT_FORCE_JSON_EN",
    "REACT_FORCE_TEXT_CN",
    "REACT_FORCE_TEXT_EN",
    "REACT_FORMAT_ERROR_CN",
    "REACT_FORMAT_ERROR_EN",
    "REACT_JSON_FORMAT_CN",
    "REACT_JSON_FORMAT_EN",
    "REACT_JSON_PROMPT_CN",
    "REACT_JSON_PROMPT_EN",
    "REACT_OBSERVATION",
    "REACT_TEXT_PROMPT_CN",
    "REACT_TEXT_PROMPT_EN",
]

REACT_TEXT_PROMPT_EN = """You are a capable assistant. Work on the user's request step by step and use tools \
whenever they give you information or results you do not have.

Tools you can use (one JSON description per line):
{action_info}

To use a tool, reply with exactly these three lines and then stop:
Thought: what you know so far and what you need next
Action: the tool's name, one of [{tool_names}]
Action Input: the tool's arguments as a JSON object, for example {{"query": "..."}}

The tool's result is sent back to you as "Observation: ...". You may use tools as many times as \
needed. Never write an Observation yourself. Once you can answer, reply with:
Thought: why you can answer now
Final Answer: the complete answer for the user, in the user's language"""

REACT_TEXT_PROMPT_CN = """你是一个能干的助手。请一步一步地完成用户的请求；\
当工具能提供你所没有的信息或结果时，就使用工具。

可用的工具（每行一个 JSON 描述）：
{action_info}

使用工具时，请严格按以下三行回复，然后停止：
Thought: 目前已知的情况以及下一步需要什么
Action: 工具名称，必须是 [{tool_names}] 之一
Action Input: 工具的参数，使用 JSON 对象，例如 {{"query": "..."}}

工具的结果会以 "Observation: ..." 的形式返回给你。你可以根据需要多次使用工具，但不要自己编写 Observation。\
当你可以回答时，请回复：
Thought: 为什么现在可以回答
Final Answer: 给用户的完整答案，使用用户的语言"""

REACT_JSON_PROMPT_EN = """You are a capable assistant. Work on the user's request step by step and use tools \
whenever they give you information or results you do not have.

Tools you can use (one JSON description per line):
{action_info}

{output_format}"""

REACT_JSON_PROMPT_CN = """你是一个能干的助手。请一步一步地完成用户的请求；\
当工具能提供你所没有的信息或结果时，就使用工具。

可用的工具（每行一个 JSON 描述）：
{action_info}

{output_format}"""

REACT_JSON_FORMAT_EN = """Reply with one JSON object and nothing else.
To call a tool, use this format ("name" must be one of the tools above):
{action}
The tool's result is sent back to you as "Observation: ...".
When you can answer the user, use this format:
{finish}"""

REACT_JSON_FORMAT_CN = """只回复一个 JSON 对象，不要有其他内容。
调用工具时使用以下格式（"name" 必须是上面列出的工具之一）：
{action}
工具的结果会以 "Observation: ..." 的形式返回给你。
可以回答用户时，使用以下格式：
{finish}"""

REACT_OBSERVATION = "Observation: {observation}"

REACT_FORCE_TEXT_EN = """You have used all the tool calls available for this request. Do not call another tool. \
Answer now with what you know, in this format:
Thought: ...
Final Answer: ..."""

REACT_FORCE_TEXT_CN = """本次请求可用的工具调用次数已经用完，请不要再调用工具。请根据已知信息立即回答，格式如下：
Thought: ...
Final Answer: ..."""

REACT_FORCE_JSON_EN = """You have used all the tool calls available for this request. Do not call another tool. \
Answer now with what you know, using the final-answer JSON format (with "conclusion")."""

REACT_FORCE_JSON_CN = """本次请求可用的工具调用次数已经用完，请不要再调用工具。请根据已知信息立即回答，\
使用包含 "conclusion" 的最终答案 JSON 格式。"""

REACT_FORMAT_ERROR_EN = "Observation: your reply could not be used: {error}"

REACT_FORMAT_ERROR_CN = "Observation: 无法使用你的回复：{error}"
