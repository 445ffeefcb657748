from __future__ import annotations

import copy

from _support import resolve
from plait.agents import Agent, AsyncAgent
from plait.agents.aggregator import InternLMToolAggregator
from plait.memory import Memory
from plait.prompts.parsers import InterpreterParser, MixedToolParser, PluginParser, ToolParser, ToolStatusCode
from plait.schema import AgentMessage
from plait.testing import scripted_llm

SEED_PROBLEM = (
    "Marie is thinking of a multiple of 63, while Jay is thinking of a factor of 63. They happen to be thinking "
    "of the same number. There are two possibilities for the number that each of them is thinking of, one "
    "positive and one negative. Find the product of these two numbers."
)
CODE_REPLY = "Let me compute.\n```python\nprint(63 * -63)"


def test_flexible_response_formatting_seed(mode: str) -> None:
    cls = Agent if mode == "sync" else AsyncAgent
    llm = scripted_llm([CODE_REPLY + "\n```\n trailing text the server never sends"], mode)
    parser = ToolParser(tool_type="code interpreter", begin="```python\n", end="\n```\n")
    llm.gen_params["stop_words"].append("\n```\n")
    agent = cls(llm, "逐步分析并编写Python代码解决以下问题。", output_format=parser)
    bot_msg = resolve(agent(AgentMessage(sender="user", content=SEED_PROBLEM)))
    assert bot_msg.content == CODE_REPLY
    assert bot_msg.formatted == {
        "tool_type": "code interpreter",
        "thought": "Let me compute.\n",
        "action": "print(63 * -63)",
        "status": ToolStatusCode.VALID_TOOL,
    }
    assert '"status": 1' in bot_msg.model_dump_json(indent=4)
    assert llm.calls[0].params["stop_words"] == ["\n```\n"]


def _turns() -> Memory:
    memory = Memory()
    parser = ToolParser(tool_type="code interpreter", begin="```python\n", end="\n```\n")
    memory.add(
        [
            AgentMessage(sender="user", content="q"),
            AgentMessage(sender="coder", content=CODE_REPLY, formatted=parser.parse_response(CODE_REPLY)),
            AgentMessage(sender="ActionExecutor", content="-3969"),
            AgentMessage(
                sender="coder",
                content="oops ```python\n",
                formatted={"tool_type": None, "thought": "x", "action": None, "status": ToolStatusCode.PARSING_ERROR},
            ),
            AgentMessage(sender="coder", content="The answer is -3969.", formatted=parser.parse_response("The answer")),
        ]
    )
    return memory


def test_tool_turns_render_through_the_parser() -> None:
    parser = ToolParser(tool_type="code interpreter", begin="```python\n", end="\n```\n", template="Write code.")
    aggregator = InternLMToolAggregator(environment_begin="<output>\n", environment_end="\n</output>")
    out = aggregator.aggregate(_turns(), "coder", parser, "sys")
    assert out == [
        {"role": "system", "content": "sys"},
        {"role": "system", "content": "Write code.", "name": "code interpreter"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "Let me compute.\n```python\nprint(63 * -63)\n```\n"},
        {"role": "environment", "content": "<output>\n-3969\n</output>", "name": "code interpreter"},
        {"role": "assistant", "content": "oops ```python\n"},
        {"role": "assistant", "content": "The answer"},
    ]


def test_mixed_parser_instructions_and_few_shot_are_not_mutated() -> None:
    parser = MixedToolParser(
        template="meta",
        parsers=[PluginParser(template="plugins here"), InterpreterParser(template="code here")],
    )
    few_shot = [
        [
            {"role": "user", "content": "2+2?"},
            {"role": "thought", "content": "I will compute.\n"},
            {"role": "tool", "content": "print(2+2)", "name": "interpreter"},
            {"role": "environment", "content": "4", "name": "interpreter"},
            {"role": "assistant", "content": "4"},
        ]
    ]
    pristine = copy.deepcopy(few_shot)
    aggregator = InternLMToolAggregator(environment_role="system", few_shot=few_shot, user_names=["user", "boss"])
    memory = Memory()
    memory.add([AgentMessage(sender="boss", content="go")])
    out = aggregator.aggregate(memory, "me", parser)
    assert out[:3] == [
        {"role": "system", "content": "meta"},
        {"role": "system", "content": "plugins here", "name": "plugin"},
        {"role": "system", "content": "code here", "name": "interpreter"},
    ]
    assert out[3:] == [
        {"role": "user", "content": "2+2?"},
        {
            "role": "assistant",
            "content": "I will compute.\n<|action_start|><|interpreter|>\nprint(2+2)<|action_end|>\n",
        },
        {"role": "system", "content": "4", "name": "interpreter"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "go"},
    ]
    assert few_shot == pristine
    aggregator.aggregate(memory, "me", parser)
    assert few_shot == pristine
