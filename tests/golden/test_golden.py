"""Golden files: the user-visible behaviour of every agent paradigm, pinned before a refactor.

Each scenario in `SCENARIOS` (the table at the end) is a short scripted run of one paradigm
of `plait.agents`, written once and run in each variant of that paradigm: ``sync``,
``async``, ``stream`` and ``astream`` (the `Agent` / `AsyncAgent` / `StreamingAgent` /
`AsyncStreamingAgent` families; only the classes that exist), or, for `Internlm2Agent`,
``call`` (``agent(msg)``), ``chat`` and ``stream_chat`` (the old API). A run records:

* ``requests``: every call a model received: which model (``llm``), ``method``
  (``chat`` / ``complete`` / ``stream_chat``), ``messages`` and ``params`` (the generation
  parameters, ``tools`` / ``tool_choice`` / ``stop_words`` included);
* ``tool_calls``: every call a tool saw (``tool`` + ``arguments``, in order);
* ``replies``: what each agent call returned (the final message's ``model_dump()``, or the
  `AgentReturn` of the old API);
* ``chunks`` (streaming variants only): per agent call, ``[content, stream_state, sender]``
  of every chunk (``[response, state]`` of `AgentReturn` snapshots), the final one included;
* ``state_dict``: the agent's ``state_dict(session_id)`` afterwards, per session used;
* ``unused_replies``: script items no model asked for.

Everything goes through `normalise` (enums as their values, dataclasses and pydantic models
as dicts, keys sorted, memory addresses masked), so the files are stable JSON.

Files: ``<scenario>.json`` when every variant records the same thing; otherwise one file
per group of variants that record the same thing, ``<scenario>.<v1>+<v2>.json``. Each file
names its ``variants``; `test_golden_files_cover_the_scenarios` checks the set is exact.

Run against a pristine checkout (not the working tree's ``src``)::

    PYTHONPATH=/path/to/checkout/src .venv/bin/pytest -q tests/golden

Regenerate (then review ``git diff tests/golden``; not with ``-n``, the writes would race)::

    PLAIT_GOLDEN_UPDATE=1 .venv/bin/pytest -q tests/golden

Update mode rewrites every file of each scenario it runs (all its variants) and deletes
files of scenarios that no longer exist.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import inspect
import json
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from _support import collect, resolve
from plait.actions import BaseAction, tool_api
from plait.agents import (
    Agent,
    AgentForInternLM,
    AsyncAgent,
    AsyncAgentForInternLM,
    AsyncAutoGPT,
    AsyncConversationalAgent,
    AsyncFunctionCallingAgent,
    AsyncMathCoder,
    AsyncReAct,
    AsyncReWOO,
    AsyncSequential,
    AsyncStreamingAgent,
    AsyncStreamingFunctionCallingAgent,
    AsyncStreamingSequential,
    AutoGPT,
    ConversationalAgent,
    FunctionCallingAgent,
    Internlm2Agent,
    MathCoder,
    ReAct,
    ReWOO,
    Sequential,
    StreamingAgent,
    StreamingFunctionCallingAgent,
    StreamingSequential,
)
from plait.llms.response import ModelResponse, ToolCall
from plait.prompts.parsers import JSONParser
from plait.testing import AsyncScriptedLLM, ScriptedLLM

GOLDEN_DIR = Path(__file__).resolve().parent
UPDATE = os.environ.get("PLAIT_GOLDEN_UPDATE", "") not in ("", "0")

ALL = ("sync", "async", "stream", "astream")
CALL = ("sync", "async")
OLD_API = ("call", "chat", "stream_chat")

AGENT = {"sync": Agent, "async": AsyncAgent, "stream": StreamingAgent, "astream": AsyncStreamingAgent}
FUNCTION_CALLING = {
    "sync": FunctionCallingAgent,
    "async": AsyncFunctionCallingAgent,
    "stream": StreamingFunctionCallingAgent,
    "astream": AsyncStreamingFunctionCallingAgent,
}
SEQUENTIAL = {
    "sync": Sequential,
    "async": AsyncSequential,
    "stream": StreamingSequential,
    "astream": AsyncStreamingSequential,
}
REACT = {"sync": ReAct, "async": AsyncReAct}
AUTOGPT = {"sync": AutoGPT, "async": AsyncAutoGPT}
CONVERSATIONAL = {"sync": ConversationalAgent, "async": AsyncConversationalAgent}
REWOO = {"sync": ReWOO, "async": AsyncReWOO}
INTERNLM = {"sync": AgentForInternLM, "async": AsyncAgentForInternLM}
MATHCODER = {"sync": MathCoder, "async": AsyncMathCoder}

PLUGIN = "<|action_start|><|plugin|>\n"
CODE = "<|action_start|><|interpreter|>\n"
END = "<|action_end|>\n"


# -- normalisation -------------------------------------------------------------------------------

_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{4,}\b")


def normalise(value: Any) -> Any:
    """`value` as plain, stable JSON data.

    Enum members become their values, pydantic models and dataclasses dicts, tuples lists,
    dict keys strings (sorted); memory addresses in text (``0x7f...``, the only
    nondeterministic data these runs produce: the script fixes tool-call ids, and nothing
    records a time) become ``0x?``. Anything else is an error, so a repr with an address
    never reaches a golden file.
    """
    if isinstance(value, enum.Enum):
        return normalise(value.value)
    if isinstance(value, BaseModel):
        return normalise(value.model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return normalise({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, Mapping):
        items = {str(normalise(k)): normalise(v) for k, v in value.items()}
        return dict(sorted(items.items()))
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        return _ADDRESS.sub("0x?", value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"golden recordings hold JSON data only, not {type(value).__name__}: {value!r}")


def dumps(data: Any) -> str:
    """JSON text for a golden file: indented, but short lists of scalars (chunks) on one line."""
    return _render(data, "") + "\n"


def _render(value: Any, pad: str) -> str:
    inner = pad + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {_render(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and value:
        flat = json.dumps(value, ensure_ascii=False)
        if not any(isinstance(v, (dict, list)) for v in value) and len(flat) <= 100:
            return flat
        return "[\n" + ",\n".join(inner + _render(v, inner) for v in value) + "\n" + pad + "]"
    return json.dumps(value, ensure_ascii=False)


# -- tools (each records the calls it sees) ------------------------------------------------------


def make_tools(log: list[dict[str, Any]]) -> dict[str, Callable[..., Any]]:
    """Plain function tools that append ``{'tool', 'arguments'}`` to `log`."""

    def weather(city: str) -> str:
        """Current weather of a city.

        Args:
            city: the city name
        """
        log.append({"tool": "weather", "arguments": {"city": city}})
        if city == "Atlantis":
            raise LookupError("unknown city Atlantis")
        return f"sunny, 21C in {city}"

    def population(city: str) -> int:
        """Population of a city.

        Args:
            city: the city name
        """
        log.append({"tool": "population", "arguments": {"city": city}})
        return 522_000

    def search(query: str) -> str:
        """Search the web.

        Args:
            query: what to look for
        """
        log.append({"tool": "search", "arguments": {"query": query}})
        return "London" if "2012" in query else f"results for {query}"

    return {"weather": weather, "population": population, "search": search}


class PyEval(BaseAction):
    """Evaluates a Python expression (a stand-in for the Jupyter interpreter)."""

    def __init__(self, log: list[dict[str, Any]]) -> None:
        super().__init__()
        self.log = log

    @tool_api
    def run(self, command: Annotated[str, "the expression"], session_id: Any = 0) -> str:
        """Evaluate the expression and return its value."""
        self.log.append({"tool": "PyEval", "arguments": {"command": command, "session_id": session_id}})
        return repr(eval(command, {"__builtins__": {"len": len}}))

    def close_session(self, session_id: Any) -> None:
        self.log.append({"tool": "PyEval.close_session", "arguments": {"session_id": session_id}})


# -- running a scenario --------------------------------------------------------------------------


@dataclass
class Run:
    """One run of a scenario body in one variant: builds models and tools, drives calls, records."""

    variant: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    replies: list[Any] = field(default_factory=list)
    chunks: list[list[Any]] = field(default_factory=list)
    sessions: list[Any] = field(default_factory=list)
    llms: dict[str, ScriptedLLM | AsyncScriptedLLM] = field(default_factory=dict)
    served: list[str] = field(default_factory=list)  # the label of the model that replied, in order

    def pick(self, family: Mapping[str, Any]) -> Any:
        """This variant's class of a paradigm."""
        return family[self.variant]

    def llm(self, script: list[Any], label: str = "llm") -> Any:
        """A scripted model for this variant (async for the async variants), recorded as `label`.

        Each reply is served through a script callable that notes `label`, so requests to
        several models are recorded in the order they were made.
        """

        def serve(item: Any) -> Callable[[Any, Any], Any]:
            def reply(messages: Any, params: Any) -> Any:
                self.served.append(label)
                return item

            return reply

        script = [serve(item) for item in script]
        llm = AsyncScriptedLLM(script) if self.variant in ("async", "astream") else ScriptedLLM(script)
        self.llms[label] = llm
        return llm

    def tools(self, *names: str) -> list[Callable[..., Any]]:
        tools = make_tools(self.tool_calls)
        return [tools[name] for name in names]

    def python(self) -> PyEval:
        return PyEval(self.tool_calls)

    def call(self, agent: Any, *message: Any, **kwargs: Any) -> Any:
        """Call `agent` the way this variant does; record and return the final result."""
        session = kwargs.get("session_id", 0)
        if session not in self.sessions:
            self.sessions.append(session)
        if self.variant == "chat":
            out = agent.chat(*message, **kwargs)
        elif self.variant == "stream_chat":
            out = agent.stream_chat(*message, **kwargs)
        else:
            out = agent(*message, **kwargs)
        if inspect.isawaitable(out):
            out = resolve(out)
        elif isinstance(out, (Iterator, AsyncIterator)):
            items = collect(out)
            self.chunks.append([normalise(_chunk(item)) for item in items])
            out = items[-1]
        self.replies.append(normalise(out))
        return out

    def recording(self, agent: Any) -> dict[str, Any]:
        """Everything this run recorded, with `agent`'s state afterwards, normalised."""
        calls = {label: iter(llm.calls) for label, llm in self.llms.items()}
        data: dict[str, Any] = {
            "requests": [
                {"llm": label, "method": c.method, "messages": c.messages, "params": c.params}
                for label in self.served
                for c in [next(calls[label])]
            ],
            "tool_calls": self.tool_calls,
            "replies": self.replies,
            "state_dict": {str(s): agent.state_dict(s) for s in self.sessions},
            "unused_replies": {label: llm.remaining for label, llm in self.llms.items()},
        }
        if self.chunks:
            data["chunks"] = self.chunks
        return normalise(data)  # type: ignore[no-any-return]


def _chunk(item: Any) -> list[Any]:
    if hasattr(item, "stream_state"):  # AgentMessage
        return [item.content, item.stream_state, item.sender]
    return [item.response, item.state]  # AgentReturn


# -- scripts --------------------------------------------------------------------------------------


class Answer(BaseModel):
    """A JSON answer."""

    answer: str


def tool_calls(*calls: tuple[str, str, str], content: str = "") -> ModelResponse:
    return ModelResponse(
        content=content, tool_calls=[ToolCall(i, n, a) for i, n, a in calls], finish_reason="tool_calls"
    )


def autogpt_reply(name: str, **args: Any) -> str:
    thoughts = {"text": f"run {name}", "reasoning": "needed", "plan": ["- step"], "criticism": "", "speak": "ok"}
    return json.dumps({"thoughts": thoughts, "command": {"name": name, "args": args}})


def blob(action: str, action_input: Any) -> str:
    return f"```json\n{json.dumps({'action': action, 'action_input': action_input})}\n```"


def plugin_call(name: str, parameters: dict[str, Any], thought: str = "Let me check.") -> str:
    return thought + PLUGIN + json.dumps({"name": name, "parameters": parameters}) + END


def code_call(code: str, thought: str = "Compute it.") -> str:
    return thought + CODE + code + END


# -- scenario bodies -------------------------------------------------------------------------------
# Each builds the variant's agent with `run`, calls it with `run.call`, and returns it.


def agent_two_turns(run: Run) -> Any:
    """Two calls: the history reaches the second prompt; call kwargs reach the model."""
    agent = run.pick(AGENT)(run.llm(["Paris.", "About 2.1 million."]), "Answer in a few words.", name="assistant")
    run.call(agent, "Capital of France?")
    run.call(agent, "Its population?", temperature=0.0)
    return agent


def agent_default_name(run: Run) -> Any:
    """No name given: replies are sent by the class name."""
    agent = run.pick(AGENT)(run.llm(["Hello there."]))
    run.call(agent, "Hi")
    return agent


def agent_unparsable(run: Run) -> Any:
    """An output format: a reply it parses, then one it rejects (parse_error in extra_info)."""
    parser = JSONParser("Reply as JSON: {answer}", answer=Answer)
    agent = run.pick(AGENT)(run.llm(['```json\n{"answer": "4"}\n```', "four"]), output_format=parser, name="json")
    run.call(agent, "2 + 2?")
    run.call(agent, "2 + 2, again?")
    return agent


def fc_tool_then_answer(run: Run) -> Any:
    """A native tool call (with text alongside), then the answer."""
    script = [
        tool_calls(("call_1", "weather", '{"city": "Oslo"}'), content="Checking the weather."),
        "It is sunny in Oslo.",
    ]
    agent = run.pick(FUNCTION_CALLING)(run.llm(script), run.tools("weather"), "Use tools.", name="fc")
    run.call(agent, "Weather in Oslo?")
    return agent


def fc_turn_budget(run: Run) -> Any:
    """max_turn=2 (model calls): after one tool round the last call has tool_choice='none'."""
    loop = tool_calls(("call_1", "population", '{"city": "Lyon"}'))
    agent = run.pick(FUNCTION_CALLING)(
        run.llm([loop, "About 522,000."]), run.tools("weather", "population"), "Use tools.", max_turn=2, name="fc"
    )
    run.call(agent, "Population of Lyon?")
    return agent


def fc_bad_tool_calls(run: Run) -> Any:
    """An unknown tool and invalid argument JSON in one turn: both come back as tool results."""
    script = [tool_calls(("c1", "wether", '{"city": "Oslo"}'), ("c2", "weather", '{"city": ')), "I could not check."]
    agent = run.pick(FUNCTION_CALLING)(run.llm(script), run.tools("weather"), "Use tools.", name="fc")
    run.call(agent, "Weather in Oslo?")
    return agent


def react_tool_then_answer(run: Run) -> Any:
    """Thought/Action/Action Input; the invented Observation is cut by the stop word."""
    script = [
        'Thought: I need the weather.\nAction: weather\nAction Input: {"city": "Paris"}\nObservation: invented',
        "Thought: I know it now.\nFinal Answer: It is sunny in Paris.",
    ]
    agent = run.pick(REACT)(run.llm(script), run.tools("weather", "population"), name="react")
    run.call(agent, "Weather in Paris?")
    return agent


def react_turn_budget(run: Run) -> Any:
    """max_turn=3 (model calls): the third asks for the final answer explicitly (repeats run, to count)."""
    loop = "Thought: again\nAction: weather\nAction Input: Oslo"
    script = [loop, loop, "Thought: enough\nFinal Answer: Oslo is sunny."]
    agent = run.pick(REACT)(run.llm(script), run.tools("weather"), max_turn=3, name="react", repeat_calls="run")
    run.call(agent, "Weather in Oslo?")
    return agent


def react_unparsable(run: Run) -> Any:
    """A reply with no protocol markers, then an unknown tool, then the answer."""
    script = ["I think it is sunny.", "Action: wether\nAction Input: Paris", "Thought: fine.\nFinal Answer: sunny"]
    agent = run.pick(REACT)(run.llm(script), run.tools("weather"), name="react")
    run.call(agent, "Weather?")
    return agent


def react_json_tool_error(run: Run) -> Any:
    """The JSON protocol; the tool raises and its error is the observation."""
    call = {"thought_process": "need data", "action": {"name": "weather", "parameters": {"city": "Atlantis"}}}
    finish = {"thought_process": "no data", "conclusion": "Atlantis is not a known city."}
    script = [f"```json\n{json.dumps(call)}\n```", json.dumps(finish)]
    agent = run.pick(REACT)(run.llm(script), run.tools("weather"), output_format="json", name="react")
    run.call(agent, "Weather in Atlantis?")
    return agent


def autogpt_command_then_finish(run: Run) -> Any:
    """One command (in a fence), then finish."""
    script = [
        f"```json\n{autogpt_reply('population', city='Lyon')}\n```",
        autogpt_reply("finish", response="Lyon has 522,000 people."),
    ]
    agent = run.pick(AUTOGPT)(
        run.llm(script),
        run.tools("population"),
        ai_name="Researcher",
        role_description="an assistant that finds facts.",
        name="autogpt",
    )
    run.call(agent, "Find the population of Lyon.")
    return agent


def autogpt_turn_budget(run: Run) -> Any:
    """max_turn=2 (model calls): the second tells the model to finish."""
    script = [autogpt_reply("population", city="Lyon"), autogpt_reply("finish", response="522,000")]
    agent = run.pick(AUTOGPT)(run.llm(script), run.tools("population"), max_turn=2, name="autogpt")
    run.call(agent, "Population of Lyon?")
    return agent


def autogpt_unparsable(run: Run) -> Any:
    """Not JSON, then JSON missing the command, then finish."""
    missing_command = json.dumps({"thoughts": {"text": "hmm"}})
    script = ["Let me think...", missing_command, autogpt_reply("finish", response="done")]
    agent = run.pick(AUTOGPT)(run.llm(script), run.tools("population"), name="autogpt")
    run.call(agent, "go")
    return agent


def conversational_tool_then_answer(run: Run) -> Any:
    """A tool step and a final answer, then a second call that sees the chat history."""
    script = [blob("weather", "Paris"), blob("Final Answer", "It is sunny in Paris."), blob("Final Answer", "Welcome!")]
    agent = run.pick(CONVERSATIONAL)(run.llm(script), run.tools("weather"), name="chat")
    run.call(agent, "Weather in Paris?")
    run.call(agent, "Thanks!")
    return agent


def conversational_limit_force(run: Run) -> Any:
    """max_iterations=2 (tool steps) with early_stopping_method='force'."""
    loop = blob("weather", "Oslo")
    agent = run.pick(CONVERSATIONAL)(
        run.llm([loop, loop]), run.tools("weather"), max_iterations=2, name="chat", repeat_calls="run"
    )
    run.call(agent, "Weather in Oslo?")
    return agent


def conversational_limit_generate(run: Run) -> Any:
    """max_iterations=2 (tool steps) with early_stopping_method='generate': a third call asks for the answer."""
    script = [blob("weather", {"city": "Oslo"}), blob("weather", "Bergen"), blob("Final Answer", "best guess: sunny")]
    agent = run.pick(CONVERSATIONAL)(
        run.llm(script), run.tools("weather"), max_iterations=2, early_stopping_method="generate", name="chat"
    )
    run.call(agent, "Weather in Oslo?")
    return agent


def conversational_unparsable(run: Run) -> Any:
    """A failed fix-up retry (an _Exception step), then a successful one."""
    script = ["nope", '{"input": 1}', "Sure! It is 4.", blob("Final Answer", "4")]
    agent = run.pick(CONVERSATIONAL)(run.llm(script), run.tools("weather"), name="chat")
    run.call(agent, "2 + 2?")
    return agent


REWOO_PLAN = "Plan: Find the host city.\n#E1 = search[2012 Olympics host]\nPlan: Get its weather.\n#E2 = weather[#E1]"


def rewoo_plan_work_solve(run: Run) -> Any:
    """A two-step plan whose second step uses #E1, then the solver."""
    agent = run.pick(REWOO)(
        run.llm([REWOO_PLAN, "Answer: It is sunny in London."]), run.tools("search", "weather"), name="rewoo"
    )
    run.call(agent, "What is the weather in the 2012 Olympics host city?")
    return agent


def rewoo_planner_budget(run: Run) -> Any:
    """Both planner attempts fail: the failure message, no tools, no solver."""
    agent = run.pick(REWOO)(run.llm(["no plan", "#E1 = search x"]), run.tools("search"), name="rewoo")
    run.call(agent, "x?")
    return agent


def rewoo_unparsable(run: Run) -> Any:
    """A bad plan is re-asked with a hint; the tool then raises and its error is the evidence."""
    bad = "Plan: both at once\n#E1 = search[a]\n#E2 = search[b]"
    script = [bad, "Plan: weather\n#E1 = weather[Atlantis]", "I could not find it."]
    agent = run.pick(REWOO)(run.llm(script), run.tools("search", "weather"), name="rewoo")
    run.call(agent, "Weather in Atlantis?")
    return agent


def internlm_plugin_and_code(run: Run) -> Any:
    """A plugin call, an interpreter call (in session 's1'), then the answer."""
    script = [plugin_call("weather", {"city": "Oslo"}), code_call("21 * 9 / 5 + 32"), "Oslo is sunny, 69.8F."]
    agent = run.pick(INTERNLM)(run.llm(script), plugins=run.tools("weather"), interpreter=run.python(), name="internlm")
    run.call(agent, "Weather in Oslo, in Fahrenheit?", session_id="s1")
    return agent


def internlm_turn_budget(run: Run) -> Any:
    """max_turn=2: the last call still runs; the reply is flagged max_turn_reached."""
    call = plugin_call("weather", {"city": "Oslo"})
    agent = run.pick(INTERNLM)(
        run.llm([call, call, "never asked"]),
        plugins=run.tools("weather"),
        max_turn=2,
        name="internlm",
        repeat_calls="run",
    )
    run.call(agent, "Weather in Oslo?")
    return agent


def internlm_unparsable(run: Run) -> Any:
    """Broken plugin JSON, a call to the missing interpreter, a good call, the answer."""
    broken = "Searching." + PLUGIN + '{"name": "weather", "parameters": {"city": }' + END
    script = [broken, code_call("1 + 1"), plugin_call("weather", {"city": "Oslo"}), "done"]
    agent = run.pick(INTERNLM)(run.llm(script), plugins=run.tools("weather"), name="internlm")
    run.call(agent, "Weather in Oslo?")
    return agent


def mathcoder_code_then_answer(run: Run) -> Any:
    """Code, then the answer, in session 3 (the async class releases the session)."""
    script = [code_call("12 * 12", "Square it."), "So the answer is $\\boxed{144}$."]
    agent = run.pick(MATHCODER)(run.llm(script), interpreter=run.python(), name="coder")
    run.call(agent, "What is 12 squared?", session_id=3)
    return agent


def mathcoder_turn_budget(run: Run) -> Any:
    """max_turn=2."""
    loop = code_call("1 + 1", "Again.")
    agent = run.pick(MATHCODER)(
        run.llm([loop, loop]), interpreter=run.python(), max_turn=2, name="coder", repeat_calls="run"
    )
    run.call(agent, "1 + 1?")
    return agent


def mathcoder_unclosed_code(run: Run) -> Any:
    """Code without the end marker still runs."""
    script = ["Compute." + CODE + "6 * 7", "$\\boxed{42}$"]
    agent = run.pick(MATHCODER)(run.llm(script), interpreter=run.python(), name="coder")
    run.call(agent, "6 times 7?")
    return agent


def internlm2_plugin_and_code(run: Run) -> Any:
    """A plugin call, an interpreter call, then the answer."""
    script = [plugin_call("weather", {"city": "Oslo"}, "Let me search. "), code_call("len('Oslo')"), "It is 4."]
    agent = Internlm2Agent(run.llm(script), plugin_executor=run.tools("weather"), interpreter_executor=[run.python()])
    run.call(agent, "Weather in Oslo, and the length of its name?")
    return agent


def internlm2_turn_budget(run: Run) -> Any:
    """max_turn=2 with interpreter calls only."""
    loop = code_call("1 + 1", "Try.")
    agent = Internlm2Agent(run.llm([loop, loop]), interpreter_executor=[run.python()], max_turn=2, repeat_calls="run")
    run.call(agent, "1 + 1?")
    return agent


def internlm2_unparsable(run: Run) -> Any:
    """A plugin call without parameters, then a good call, then the answer."""
    broken = "Searching." + PLUGIN + '{"name": "weather"}' + END
    script = [broken, plugin_call("weather", {"city": "Oslo"}), "Sunny."]
    agent = Internlm2Agent(run.llm(script), plugin_executor=run.tools("weather"))
    run.call(agent, "Weather in Oslo?")
    return agent


def sequential_tool_then_edit(run: Run) -> Any:
    """A function-calling member with a tool round, then an editing member."""
    solver_script = [tool_calls(("call_1", "weather", '{"city": "Oslo"}')), "sunny, 21C"]
    solver = run.pick(FUNCTION_CALLING)(
        run.llm(solver_script, "solver"), run.tools("weather"), "Use tools.", name="solver"
    )
    editor = run.pick(AGENT)(run.llm(["It is a sunny 21C in Oslo."], "editor"), "Rewrite politely.", name="editor")
    pipeline = run.pick(SEQUENTIAL)(solver, editor, name="pipeline")
    run.call(pipeline, "Weather in Oslo?")
    return pipeline


def sequential_exit_at(run: Run) -> Any:
    """exit_at=2 over two members: writer, critic, writer again."""
    writer = run.pick(AGENT)(run.llm(["draft one", "draft two"], "writer"), "Write.", name="writer")
    critic = run.pick(AGENT)(run.llm(["too short"], "critic"), "Criticise.", name="critic")
    pipeline = run.pick(SEQUENTIAL)(writer, critic, name="pipeline")
    run.call(pipeline, "A haiku about rain", exit_at=2)
    return pipeline


@dataclass(frozen=True)
class Scenario:
    name: str
    body: Callable[[Run], Any]
    variants: tuple[str, ...]


SCENARIOS = [
    Scenario("agent_two_turns", agent_two_turns, ALL),
    Scenario("agent_default_name", agent_default_name, ALL),
    Scenario("agent_unparsable", agent_unparsable, ALL),
    Scenario("fc_tool_then_answer", fc_tool_then_answer, ALL),
    Scenario("fc_turn_budget", fc_turn_budget, ALL),
    Scenario("fc_bad_tool_calls", fc_bad_tool_calls, ALL),
    Scenario("react_tool_then_answer", react_tool_then_answer, CALL),
    Scenario("react_turn_budget", react_turn_budget, CALL),
    Scenario("react_unparsable", react_unparsable, CALL),
    Scenario("react_json_tool_error", react_json_tool_error, CALL),
    Scenario("autogpt_command_then_finish", autogpt_command_then_finish, CALL),
    Scenario("autogpt_turn_budget", autogpt_turn_budget, CALL),
    Scenario("autogpt_unparsable", autogpt_unparsable, CALL),
    Scenario("conversational_tool_then_answer", conversational_tool_then_answer, CALL),
    Scenario("conversational_limit_force", conversational_limit_force, CALL),
    Scenario("conversational_limit_generate", conversational_limit_generate, CALL),
    Scenario("conversational_unparsable", conversational_unparsable, CALL),
    Scenario("rewoo_plan_work_solve", rewoo_plan_work_solve, CALL),
    Scenario("rewoo_planner_budget", rewoo_planner_budget, CALL),
    Scenario("rewoo_unparsable", rewoo_unparsable, CALL),
    Scenario("internlm_plugin_and_code", internlm_plugin_and_code, CALL),
    Scenario("internlm_turn_budget", internlm_turn_budget, CALL),
    Scenario("internlm_unparsable", internlm_unparsable, CALL),
    Scenario("mathcoder_code_then_answer", mathcoder_code_then_answer, CALL),
    Scenario("mathcoder_turn_budget", mathcoder_turn_budget, CALL),
    Scenario("mathcoder_unclosed_code", mathcoder_unclosed_code, CALL),
    Scenario("internlm2_plugin_and_code", internlm2_plugin_and_code, OLD_API),
    Scenario("internlm2_turn_budget", internlm2_turn_budget, OLD_API),
    Scenario("internlm2_unparsable", internlm2_unparsable, OLD_API),
    Scenario("sequential_tool_then_edit", sequential_tool_then_edit, ALL),
    Scenario("sequential_exit_at", sequential_exit_at, ALL),
]
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


# -- the golden files -------------------------------------------------------------------------------


def record(scenario: Scenario, variant: str) -> dict[str, Any]:
    """Run `scenario` in `variant` and return its recording."""
    run = Run(variant)
    agent = scenario.body(run)
    return run.recording(agent)


def golden_files(name: str) -> list[Path]:
    """The files of scenario `name`: ``name.json`` or ``name.<variants>.json``."""
    return sorted(p for p in GOLDEN_DIR.glob("*.json") if p.name.split(".")[0] == name)


@functools.cache
def write_golden(name: str) -> None:
    """Record every variant of scenario `name`; write one file per group of identical recordings."""
    scenario = BY_NAME[name]
    groups: dict[str, list[str]] = {}
    for variant in scenario.variants:
        groups.setdefault(dumps(record(scenario, variant)), []).append(variant)
    for path in golden_files(name):
        path.unlink()
    for text, variants in groups.items():
        suffix = "" if len(groups) == 1 else "." + "+".join(variants)
        payload = {"scenario": name, "variants": variants, "recording": json.loads(text)}
        (GOLDEN_DIR / f"{name}{suffix}.json").write_text(dumps(payload), "utf-8")


def load_golden(name: str, variant: str) -> dict[str, Any]:
    for path in golden_files(name):
        payload = json.loads(path.read_text("utf-8"))
        if variant in payload["variants"]:
            return payload  # type: ignore[no-any-return]
    pytest.fail(f"no golden file of {name!r} covers {variant!r}; regenerate with PLAIT_GOLDEN_UPDATE=1")


@pytest.mark.parametrize(
    ("name", "variant"), [pytest.param(s.name, v, id=f"{s.name}-{v}") for s in SCENARIOS for v in s.variants]
)
def test_golden(name: str, variant: str) -> None:
    if UPDATE:
        write_golden(name)
    golden = load_golden(name, variant)
    actual = record(BY_NAME[name], variant)
    if actual != golden["recording"]:
        diff = difflib.unified_diff(
            dumps(golden["recording"]).splitlines(),
            dumps(actual).splitlines(),
            f"golden ({'+'.join(golden['variants'])})",
            f"actual ({variant})",
            lineterm="",
        )
        lines = list(diff)
        shown = "\n".join(lines[:300]) + (f"\n... {len(lines) - 300} more lines" if len(lines) > 300 else "")
        pytest.fail(f"{name} [{variant}] differs from its golden file:\n{shown}", pytrace=False)


def test_golden_files_cover_the_scenarios() -> None:
    """Every scenario's variants are covered exactly once; no file belongs to no scenario."""
    if UPDATE:
        for path in GOLDEN_DIR.glob("*.json"):
            if path.name.split(".")[0] not in BY_NAME:
                path.unlink()
        for scenario in SCENARIOS:
            write_golden(scenario.name)
    covered: dict[str, list[str]] = {}
    for path in sorted(GOLDEN_DIR.glob("*.json")):
        payload = json.loads(path.read_text("utf-8"))
        name = path.name.split(".")[0]
        assert payload["scenario"] == name in BY_NAME, f"{path.name} belongs to no scenario"
        expected_name = name + (
            "" if len(payload["variants"]) == len(BY_NAME[name].variants) else "." + "+".join(payload["variants"])
        )
        assert path.name == f"{expected_name}.json", f"{path.name} should be named {expected_name}.json"
        covered.setdefault(name, []).extend(payload["variants"])
    for scenario in SCENARIOS:
        assert sorted(covered.get(scenario.name, [])) == sorted(scenario.variants), scenario.name
