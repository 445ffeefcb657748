from __future__ import annotations

import json
import warnings

from plait.schema import (
    ActionReturn,
    ActionStatusCode,
    ActionValidCode,
    AgentMessage,
    AgentStatusCode,
    FunctionCall,
    ModelStatusCode,
    dataclass2dict,
)


def test_agent_message_prints_like_the_seed() -> None:
    msg = AgentMessage(sender="Agent", content="急")
    assert str(msg) == (
        "content='急' sender='Agent' formatted=None extra_info=None type=None receiver=None "
        "stream_state=<AgentStatusCode.END: 0>"
    )
    assert repr(msg).startswith("AgentMessage(content='急', sender='Agent', formatted=None")
    assert list(AgentMessage.model_fields) == [
        "content",
        "sender",
        "formatted",
        "extra_info",
        "type",
        "receiver",
        "stream_state",
        "reasoning",  # issue 37: plait's addition, last; absent from str, repr and dumps when None
    ]
    assert "reasoning" not in msg.model_dump() and "reasoning" not in msg.model_dump_json()


def test_agent_message_json_and_copy() -> None:
    msg = AgentMessage(content="x", formatted={"status": 1, "nested": [1]})
    data = json.loads(msg.model_dump_json(indent=4))
    assert data["stream_state"] == 0 and data["sender"] == "user"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        deep = msg.copy(deep=True)
        shallow = msg.copy()
    deep.formatted["nested"].append(2)
    assert msg.formatted["nested"] == [1]
    assert shallow.formatted is msg.formatted
    assert msg.copy(update={"content": "y"}).content == "y"


def test_status_codes_match_the_documented_values() -> None:
    assert ActionStatusCode.ARGS_ERROR == -1001 and ActionValidCode.FINISH == 1
    assert ModelStatusCode.STREAM_ING == 1 and AgentStatusCode.CODE_RETURN == 8
    assert AgentStatusCode(ModelStatusCode.END) is AgentStatusCode.END


def test_action_return_format_result() -> None:
    ret = ActionReturn(
        result=[
            {"type": "text", "content": "10.0"},
            {"type": "image", "content": "/tmp/a.png"},
            {"type": "text", "content": {"k": "✓"}},
        ]
    )
    assert ret.format_result() == '10.0\n[image](/tmp/a.png)\n{"k": "✓"}'
    assert dataclass2dict(ret)["state"] == 0
    assert type(dataclass2dict(ret)["state"]) is int
    assert FunctionCall("a", {"x": 1}).parameters == {"x": 1}
