"""Hostile values from outside (issue 15): cleaned at the boundary, never a crash or a poisoned session.

`plait.untrusted` is fuzzed directly (10,000 cases by default; ``PLAIT_FUZZ_EXAMPLES``
raises it), and the native tool-calling agent is driven with the arguments that used to
escape it (a 5,000-digit number, nesting 100,000 deep, non-string fields, lone
surrogates), in sync and async from one body.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from _support import Doubler, resolve
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.exceptions import ParseError
from plait.llms.response import ModelResponse, ToolCall
from plait.testing import ScriptedLLM
from plait.untrusted import MAX_DEPTH, clean, clean_text, decode_arguments, loads

FUZZ = int(os.environ.get("PLAIT_FUZZ_EXAMPLES", "10000"))

HOSTILE_ARGUMENTS = [
    '{"x": ' + "9" * 5000 + "}",  # int() refuses more than 4,300 digits
    '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}",  # RecursionError in json.loads
    '{"x": ' + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "}",  # decodes, too deep to keep
    '{"x": "\\ud800"}',  # a lone surrogate as a JSON escape
    '{"x\ud800": 1}',  # one in the raw text
    "null",
    "[1, 2]",
    "",
    "{not json",
]


def _encodable(value: object) -> bool:
    json.dumps(value, ensure_ascii=False).encode("utf-8")
    return True


def test_clean_text_replaces_each_lone_surrogate() -> None:
    assert clean_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
    text = "plain ascii"
    assert clean_text(text) is text  # nothing to do: the same object
    assert clean_text("emoji \U0001f600") == "emoji \U0001f600"


def test_clean_rebuilds_only_what_changed() -> None:
    value = {"ok": ["fine", 1, None], "k\ud800": ("v\udc00",)}
    assert clean(value) == {"ok": ["fine", 1, None], "k\ufffd": ("v\ufffd",)}
    untouched = {"a": [1, "b"]}
    assert clean(untouched) is untouched


@pytest.mark.parametrize(
    "text", ["[" * 100_000, "9" * 5000, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), '{"a": 1', "\ud800"]
)
def test_loads_refuses_what_it_cannot_keep(text: str) -> None:
    with pytest.raises(ParseError):
        loads(text)


def test_loads_cleans_decoded_strings() -> None:
    assert loads('{"a\\ud800": ["\\udc00x", "\\ud83d\\ude00"]}') == {"a\ufffd": ["\ufffdx", "\U0001f600"]}
    assert loads(b'{"bytes": "\xff"}') == {"bytes": "\ufffd"}


@pytest.mark.parametrize("raw", [*HOSTILE_ARGUMENTS, {"x": "\ud800"}, 12, ["a"], None, {1: "int key"}])
def test_decode_arguments_never_raises(raw: object) -> None:
    arguments = decode_arguments(raw)
    assert isinstance(arguments, (dict, str)) and _encodable(arguments)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_surrogate_text = st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=12)


def _reference_loads(text: str | bytes) -> object:
    """What `loads` answered before it read through orjson: `json.loads`, then `clean` (or a ParseError)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        return clean(json.loads(text))
    except (ValueError, RecursionError) as exc:
        raise ParseError(str(exc), raw=None) from None


def _same_as_reference(text: str | bytes) -> None:
    try:
        expected = _reference_loads(text)
    except ParseError:
        with pytest.raises(ParseError):
            loads(text)
        return
    got = loads(text)
    assert got == expected or json.dumps(got) == json.dumps(expected)  # NaN is never equal to itself
    assert json.dumps(got) == json.dumps(expected)  # ints stay ints, floats stay floats


@pytest.mark.parametrize(
    "text",
    [
        b'{"seed": 123456789012345678901234567890}',  # beyond 64 bits: orjson would read a float
        b'{"a": 18446744073709551615, "b": -9223372036854775808, "c": 9223372036854775807}',
        b'{"text": "digits 12345678901234567890 in a string"}',
        b"[NaN, Infinity, -Infinity, 1e400, -0, -0.0, 1E5, 0.1]",
        b'{"a": 1, "a": 2}',
        rb'"\ud83d\ude00 \ud800"',
        b'"\xff raw"',
        b"\xef\xbb\xbf{}",  # a byte-order mark
        rb'{"a": "\u0000", "b": "tab\there"}',
        b'"raw\ttab"',
        b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1),
        b"[" * MAX_DEPTH + b"]" * MAX_DEPTH,
        b"[" * 2000 + b"]" * 2000,
        b" [1, 2] ",
        b"[1,]",
        b"",
    ],
)
def test_loads_reads_through_orjson_exactly_what_the_standard_decoder_reads(text: bytes) -> None:
    _same_as_reference(text)
    _same_as_reference(text.decode("utf-8", "replace"))


@settings(max_examples=FUZZ // 4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        _json_values.map(json.dumps),
        _json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
        st.integers(min_value=-(2**80), max_value=2**80).map(str),
        st.binary(max_size=40),
        st.text(max_size=40),
    )
)
def test_fuzz_loads_matches_the_standard_decoder(text: str | bytes) -> None:
    _same_as_reference(text)
    if isinstance(text, str):
        _same_as_reference(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=FUZZ // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(st.text(), _surrogate_text, _json_values.map(json.dumps), st.binary().map(lambda b: b.decode("latin-1")))
)
def test_fuzz_decode_arguments_text(raw: str) -> None:
    arguments = decode_arguments(raw)
    assert isinstance(arguments, (dict, str)) and _encodable(arguments)


@settings(max_examples=FUZZ // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_json_values, st.dictionaries(_surrogate_text, _json_values, max_size=3)))
def test_fuzz_decode_arguments_values(raw: Any) -> None:
    arguments = decode_arguments(raw)
    assert isinstance(arguments, (dict, str)) and _encodable(arguments)


@pytest.mark.parametrize("arguments", HOSTILE_ARGUMENTS)
def test_function_calling_agent_survives_hostile_arguments(mode: str, arguments: str) -> None:
    """Each hostile call becomes an observation the model sees; the run ends normally and its state saves."""
    call = ModelResponse(tool_calls=[ToolCall("c1", "Doubler", arguments)])
    llm = ScriptedLLM([call, "Sorry, that did not work."])
    cls = FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent
    agent = cls(llm, [Doubler()], max_turn=3)
    reply = resolve(agent("double it"))
    assert reply.content == "Sorry, that did not work."
    tool_message = llm.calls[1].messages[-1]
    assert tool_message["role"] == "tool" and tool_message["content"]  # the error, as data
    state = agent.state_dict()
    json.dumps(state, ensure_ascii=False, default=str).encode("utf-8")  # nothing unencodable was stored
    assert "\ud800" not in json.dumps(state, default=str, ensure_ascii=False)


def test_a_surrogate_from_the_server_does_not_poison_the_session(mode: str, tmp_path: Any) -> None:
    """Issue 15, item 2: a reply holding ``\\ud800`` (a JSON escape) is stored clean; later turns and saving work."""
    from plait.agents import Agent, AsyncAgent
    from plait.llms import GPTAPI, AsyncGPTAPI
    from plait.testing.fake_openai import FakeOpenAIServer, Reply

    replies = iter([Reply("bad \ud800 reply"), Reply("fine"), Reply("still fine")])
    with FakeOpenAIServer(handler=lambda body: next(replies)) as server:
        llm_cls = GPTAPI if mode == "sync" else AsyncGPTAPI
        llm = llm_cls("m", api_base=server.base_url, key="k")
        agent = Agent(llm, name="a") if mode == "sync" else AsyncAgent(llm, name="a")
        assert resolve(agent("hi")).content == "bad \ufffd reply"
        assert resolve(agent("more \ud800 from the user")).content == "fine"
        agent.save_state(tmp_path / "state.json")  # used to raise UnicodeEncodeError
        assert resolve(agent("and again")).content == "still fine"
        sent = server.requests[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] != "system"][:4] == [
        "hi",
        "bad \ufffd reply",
        "more \ufffd from the user",
        "fine",
    ]


def test_native_tool_call_fields_of_any_type_are_data(mode: str) -> None:
    """Issue 15, item 1: non-string ids, names and arguments in a tool call are turned into clean text.

    A missing id is re-issued by the call's place in the turn (issue 33: one id names one call).
    """
    odd = ModelResponse(tool_calls=[ToolCall(7, {"n": 1}, {"x": 21}), ToolCall(None, "Doubler\ud800", 12)])
    assert [(c.id, c.name, c.arguments) for c in odd.tool_calls] == [
        ("7", '{"n": 1}', '{"x": 21}'),
        ("call_1", "Doubler\ufffd", "12"),
    ]
    llm = ScriptedLLM([odd, "done"])
    cls = FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent
    assert resolve(cls(llm, [Doubler()], max_turn=3)("go")).content == "done"


@pytest.mark.parametrize("body", ['{"choices": [{"message": {"content": ' + "9" * 5000 + "}}]}", "[" * 100_000])
def test_a_hostile_200_body_is_an_llm_error(mode: str, body: str) -> None:
    """Issue 15, item 5: a 200 whose body Python's JSON decoder chokes on is an `LLMResponseError`, not a bare error."""
    from plait.exceptions import LLMResponseError
    from plait.llms import GPTAPI, AsyncGPTAPI
    from plait.testing.fake_openai import FakeOpenAIServer, HTTPFault

    with FakeOpenAIServer(handler=lambda _: HTTPFault(status=200, body=body)) as server:
        llm_cls = GPTAPI if mode == "sync" else AsyncGPTAPI
        llm = llm_cls("m", api_base=server.base_url, key="k", retry=2, backoff_base=0.01)
        with pytest.raises(LLMResponseError):
            resolve(llm.chat("hi"))


def test_nesting_past_orjsons_limit_is_refused_without_recursing_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard decoder would recurse to the interpreter's limit, where a finalizer that runs then fails."""
    import plait.untrusted

    def recursing(*args: object, **kwargs: object) -> object:
        raise AssertionError("json.loads was asked")

    monkeypatch.setattr(plait.untrusted.json, "loads", recursing)
    for text in ("[" * 100_000, '{"a": ' * 5000):
        with pytest.raises(ParseError, match="nested deeper"):
            loads(text)
