"""Prompts of `plait.agents.ConversationalAgent` (after LangChain's conversational ReAct agent).

The layout follows seed 004: a system prompt, the chat history, a human message with the
tools, the response format and the user's input (``{tools}``, ``{tool_names}``,
``{input}``), then the scratchpad: each model reply followed by a tool-response message
(``{observation}``). Literal braces are doubled.
"""

from __future__ import annotations

__all__ = [
    "CONVERSATIONAL_FIX",
    "CONVERSATIONAL_GENERATE",
    "CONVERSATIONAL_HUMAN",
    "CONVERSATIONAL_STOPPED",
    "CONVERSATIONAL_SYSTEM",
    "CONVERSATIONAL_TOOL_RESPONSE",
]

CONVERSATIONAL_SYSTEM = """Assistant is a large language model that helps with a wide range of tasks: answering \
simple questions, explaining topics in depth, and discussing them. It writes natural, coherent replies that stay \
on the topic of the conversation.

Assistant can reason over long texts and uses what it has read to give accurate, informative answers. When a \
question needs information it does not have, it uses the tools it is given rather than guessing.

Whether the user needs help with a specific question or just wants to talk about a topic, Assistant is here to \
help."""

CONVERSATIONAL_HUMAN = """TOOLS
------
Assistant can ask the user to run tools that look up information useful for answering the user's original \
question. The tools are:

{tools}

RESPONSE FORMAT INSTRUCTIONS
----------------------------

Reply in one of two formats.

**Option 1:**
To have the human run a tool, reply with a markdown code snippet in this schema:

```json
{{
    "action": string,  // the tool to run, one of: {tool_names}
    "action_input": string  // the input for the tool
}}
```

**Option 2:**
To answer the human directly, reply with a markdown code snippet in this schema:

```json
{{
    "action": "Final Answer",
    "action_input": string  // your reply to the human
}}
```

USER'S INPUT
--------------------
Here is the user's input (remember to reply with a markdown code snippet of a json blob with a single action, and \
nothing else):

{input}"""

CONVERSATIONAL_TOOL_RESPONSE = """TOOL RESPONSE:
---------------------
{observation}

USER'S INPUT
--------------------

So, what is the answer to my original question? If you use information from the tools, state it explicitly in \
your answer: I have not seen the tool responses. Remember to reply with a markdown code snippet of a json blob \
with a single action, and nothing else."""

CONVERSATIONAL_FIX = """Your last reply could not be parsed: {error}
Reply again with a markdown code snippet of a json blob with a single action ("action" and "action_input"), and \
nothing else. Use "Final Answer" as the action to reply to me directly."""

CONVERSATIONAL_GENERATE = """You have run out of tool calls for this question. Using what the tools returned so \
far, give your final answer now: reply with the "Final Answer" action."""

CONVERSATIONAL_STOPPED = "Agent stopped: it reached the limit of {max_iterations} iterations without a final answer."
