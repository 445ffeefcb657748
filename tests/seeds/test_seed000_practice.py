"""Seed 000's "Practice" examples, written as in the seed (lagent -> plait).

Only the model construction is redirected: `VllmModel` (needs a GPU) becomes a scripted
model with the same constructor arguments, and `AsyncGPTAPI` talks to a local fake
OpenAI-compatible server through ``OPENAI_BASE_URL``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plait.actions import ActionExecutor, IPythonInteractive
from plait.agents import Agent, AsyncAgent
from plait.agents.aggregator import InternLMToolAggregator
from plait.hooks import Hook
from plait.llms import INTERNLM2_META
from plait.prompts.parsers import ToolParser
from plait.schema import ActionReturn, ActionStatusCode, AgentMessage
from plait.testing import ScriptedLLM
from plait.testing.fake_openai import FakeOpenAIServer

CODER_SCRIPT = [
    "The projection is (a.b / |b|^2) b.\n```python\nimport math\nb = [1, -3]\nscale = 2 / (1 + 9)\n"
    "print([scale * x for x in b])\n```\n",
    "So the projection is $\\begin{pmatrix} 1/5 \\\\ -3/5 \\end{pmatrix}$.",
]
created: list[dict[str, Any]] = []


def VllmModel(**kwargs: Any) -> ScriptedLLM:
    created.append(kwargs)
    return ScriptedLLM(
        list(CODER_SCRIPT),
        **{k: kwargs[k] for k in ("top_k", "temperature", "stop_words", "max_new_tokens")},
    )


class CodeProcessor(Hook):
    def before_action(self, executor, message, session_id):
        message = message.copy(deep=True)
        message.content = dict(name="IPythonInteractive", parameters={"command": message.formatted["action"]})
        return message

    def after_action(self, executor, message, session_id):
        action_return = message.content
        if isinstance(action_return, ActionReturn):
            if action_return.state == ActionStatusCode.SUCCESS:
                response = action_return.format_result()
            else:
                response = action_return.errmsg
        else:
            response = action_return
        message.content = response
        return message


class Coder(Agent):
    def __init__(self, model_path, system_prompt, max_turn=3):
        super().__init__()
        llm = VllmModel(
            path=model_path,
            meta_template=INTERNLM2_META,
            tp=1,
            top_k=1,
            temperature=1.0,
            stop_words=["\n```\n", "<|im_end|>"],
            max_new_tokens=1024,
        )
        self.agent = Agent(
            llm,
            system_prompt,
            output_format=ToolParser(tool_type="code interpreter", begin="```python\n", end="\n```\n"),
            # `InternLMToolAggregator` is adapted to `ToolParser` for aggregating
            # messages with tool invocations and execution results
            aggregator=InternLMToolAggregator(),
        )
        self.executor = ActionExecutor([IPythonInteractive()], hooks=[CodeProcessor()])
        self.max_turn = max_turn

    def forward(self, message: AgentMessage, session_id=0) -> AgentMessage:
        for _ in range(self.max_turn):
            message = self.agent(message, session_id=session_id)
            if message.formatted["tool_type"] is None:
                return message
            message = self.executor(message, session_id=session_id)
        return message


def test_coder_seed() -> None:
    coder = Coder("Qwen/Qwen2-7B-Instruct", "Solve the problem step by step with assistance of Python code")
    query = AgentMessage(
        sender="user",
        content="Find the projection of $\\mathbf{a}$ onto $\\mathbf{b} = "
        "\\begin{pmatrix} 1 \\\\ -3 \\end{pmatrix}$ if $\\mathbf{a} \\cdot \\mathbf{b} = 2.$",
    )
    answer = coder(query)
    assert answer.content == CODER_SCRIPT[1]
    assert created[-1]["path"] == "Qwen/Qwen2-7B-Instruct" and created[-1]["meta_template"] is INTERNLM2_META
    steps = coder.state_dict()["agent.memory"]
    assert [m["sender"] for m in steps] == ["user", "Agent", "ActionExecutor", "Agent"]
    assert steps[2]["content"] == "[0.2, -0.6000000000000001]"
    # the tool result reached the model as an environment turn after the rendered code call
    second_prompt = coder.agent.llm.calls[1].messages
    assert second_prompt[-1] == {
        "role": "environment",
        "content": "[0.2, -0.6000000000000001]",
        "name": "code interpreter",
    }
    assert second_prompt[-2]["content"].endswith(
        "```python\nimport math\nb = [1, -3]\nscale = 2 / (1 + 9)\nprint([scale * x for x in b])\n```\n"
    )
    assert list(coder.state_dict()) == ["memory", "agent.memory"]


class PrefixedMessageHook(Hook):
    def __init__(self, prefix: str, senders: list = None):  # noqa: RUF013  (as written in the seed)
        self.prefix = prefix
        self.senders = senders or []

    def before_agent(self, agent, messages, session_id):
        for message in messages:
            if message.sender in self.senders:
                message.content = self.prefix + message.content


def _blog_handler(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    last = body["messages"][-1]["content"]
    role = "critic" if system.startswith("Generate critique") else "writer"
    return f"{role} turn {len(body['messages'])} on: {last[:60]}"


def test_async_blogger_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.llms import AsyncGPTAPI

    with FakeOpenAIServer(handler=_blog_handler) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        import os

        os.environ["OPENAI_API_KEY"] = "YOUR_API_KEY"

        class AsyncBlogger(AsyncAgent):
            def __init__(self, model_path, writer_prompt, critic_prompt, critic_prefix="", max_turn=3):
                super().__init__()
                llm = AsyncGPTAPI(model_type=model_path, retry=5, max_new_tokens=2048)
                self.writer = AsyncAgent(llm, writer_prompt, name="writer")
                self.critic = AsyncAgent(
                    llm, critic_prompt, name="critic", hooks=[PrefixedMessageHook(critic_prefix, ["writer"])]
                )
                self.max_turn = max_turn

            async def forward(self, message: AgentMessage, session_id=0) -> AgentMessage:
                for _ in range(self.max_turn):
                    message = await self.writer(message, session_id=session_id)
                    message = await self.critic(message, session_id=session_id)
                return await self.writer(message, session_id=session_id)

        blogger = AsyncBlogger(
            "gpt-4o-2024-05-13",
            writer_prompt="You are an writing assistant tasked to write engaging blogpost. You try to generate the "
            "best blogpost possible for the user's request. "
            "If the user provides critique, then respond with a revised version of your previous attempts",
            critic_prompt="Generate critique and recommendations on the writing. Provide detailed recommendations, "
            "including requests for length, depth, style, etc..",
            critic_prefix="Reflect and provide critique on the following writing. \n\n",
        )
        user_prompt = (
            "Write an engaging blogpost on the recent updates in {topic}. "
            "The blogpost should be engaging and understandable for general audience. "
            "Should have more than 3 paragraphes but no longer than 1000 words."
        )
        topics = ["AI", "Biotechnology", "New Energy", "Video Games", "Pop Music"]

        async def run() -> list[AgentMessage]:
            return await asyncio.gather(
                *[
                    blogger(AgentMessage(sender="user", content=user_prompt.format(topic=topic)), session_id=i)
                    for i, topic in enumerate(topics)
                ]
            )

        bot_msgs = asyncio.run(run())
        assert all(m.sender == "writer" for m in bot_msgs)
        assert server.headers[0]["Authorization"] == "Bearer YOUR_API_KEY"
        assert len(server.requests) == 5 * 7
        for i, topic in enumerate(topics):
            writer_memory = blogger.state_dict(session_id=i)["writer.memory"]
            critic_memory = blogger.state_dict(session_id=i)["critic.memory"]
            assert len(writer_memory) == 8 and len(critic_memory) == 6
            assert topic in writer_memory[0]["content"]
            assert all(topic in m["content"] or m["sender"] != "user" for m in writer_memory[:1])
            # the critic saw the writer's drafts with the prefix; the writer's own memory did not change
            assert critic_memory[0]["content"].startswith("Reflect and provide critique")
            assert not writer_memory[1]["content"].startswith("Reflect")
            other = topics[(i + 1) % len(topics)]
            assert all(other not in m["content"] for m in writer_memory)
        os.environ.pop("OPENAI_API_KEY")
