"""AgentLego tools (seed 002's tool library) as plait actions (`AgentLegoTool`).

No ``from __future__ import annotations`` here: AgentLego reads its tools' annotations as real types.
"""

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from _action_support import call_action, call_executor, make_executor
from agentlego.tools import BaseTool, Calculator, make_tool
from agentlego.types import Annotated, AudioIO, File, ImageIO, Info
from PIL import Image

from _support import resolve
from plait.actions import AgentLegoTool, AsyncAgentLegoTool
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.exceptions import UserError
from plait.llms.response import ModelResponse, ToolCall
from plait.schema import ActionStatusCode
from plait.testing import scripted_llm


@pytest.fixture(autouse=True)
def agentlego_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """AgentLego writes generated files under $AGENTLEGO_TMPDIR (``./generated`` by default)."""
    monkeypatch.setenv("AGENTLEGO_TMPDIR", str(tmp_path / "generated"))
    return tmp_path / "generated"


def wrap(mode: str, tool: Any, **kwargs: Any) -> AgentLegoTool:
    return AgentLegoTool(tool, **kwargs) if mode == "sync" else AsyncAgentLegoTool(tool, **kwargs)


def test_agentlego_calculator_runs_through_function_calling_agent(mode: str) -> None:
    call = ModelResponse(
        tool_calls=[ToolCall("c1", "Calculator", '{"expression": "37 * 91"}')], finish_reason="tool_calls"
    )
    cls = FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent
    agent = cls(scripted_llm([call, "37 * 91 = 3367"], mode), [wrap(mode, Calculator())], "Use tools.")
    reply = resolve(agent("What is 37 * 91?"))
    assert reply.content == "37 * 91 = 3367"
    first, second = agent.llm.calls
    [spec] = first.params["tools"]
    assert spec["function"] == {
        "name": "Calculator",
        "description": (
            "A calculator tool. The input must be a single Python expression and you cannot import packages. "
            "You can use functions in the `math` package without import."
        ),
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
            "additionalProperties": False,
        },
    }
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "3367"}


class Flip(BaseTool):
    default_desc = "Mirror an image left to right."

    def apply(
        self,
        image: ImageIO,
        times: Annotated[int, Info("how many times to mirror")] = 1,
        scale: float = 1.0,
        grey: bool = False,
    ) -> Annotated[ImageIO, Info("the mirrored image")]:
        picture = image.to_pil()
        for _ in range(times):
            picture = picture.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        if grey:
            picture = picture.convert("L")
        return ImageIO(picture.resize((int(picture.width * scale), picture.height)))


class Convert(BaseTool):
    default_desc = "Convert a sound and a document."

    def apply(
        self, sound: AudioIO, document: Annotated[File, Info("the report", filetype="office/xlsx")]
    ) -> tuple[Annotated[File, Info(filetype="text/plain")], str]:
        report = Path(document.to_path()).read_text()
        return File(b"converted", filetype="text/plain"), f"{Path(sound.to_path()).name} + {report}"


def test_inputs_become_parameters_and_files_become_paths() -> None:
    flip = AgentLegoTool(Flip())
    assert flip.description["description"] == "Mirror an image left to right."
    assert [(p["name"], p["type"], p["description"]) for p in flip.description["parameters"]] == [
        ("image", "STRING", "path to an image file"),
        ("times", "NUMBER", "how many times to mirror (default: 1)"),
        ("scale", "FLOAT", "default: 1.0"),
        ("grey", "BOOLEAN", "default: False"),
    ]
    assert flip.description["required"] == ["image"]
    convert = AgentLegoTool(Convert())
    assert [(p["name"], p["description"]) for p in convert.description["parameters"]] == [
        ("sound", "path to an audio file"),
        ("document", "path to a file (office/xlsx): the report"),
    ]


def _red_left(tmp_path: Path) -> Path:
    path = tmp_path / "in.png"
    picture = Image.new("RGB", (2, 1))
    picture.putpixel((0, 0), (255, 0, 0))
    picture.save(path)
    return path


def test_an_image_goes_in_and_comes_out_as_a_path(mode: str, tmp_path: Path, agentlego_outputs: Path) -> None:
    executor = make_executor(mode, [wrap(mode, Flip())])
    ret = call_executor(executor, "Flip", {"image": str(_red_left(tmp_path)), "scale": 2.0})
    assert ret.state == ActionStatusCode.SUCCESS
    [item] = ret.result
    assert item["type"] == "image" and Path(item["content"]).parent == agentlego_outputs / "image"
    with Image.open(item["content"]) as out:
        assert out.size == (4, 1) and out.getpixel((3, 0)) == (255, 0, 0) and out.getpixel((0, 0)) == (0, 0, 0)


def test_several_outputs_are_one_item_each(mode: str, tmp_path: Path, agentlego_outputs: Path) -> None:
    sound, document = tmp_path / "a.wav", tmp_path / "r.xlsx"
    sound.write_bytes(b"RIFF")
    document.write_bytes(b"PK")
    ret = call_action(mode, wrap(mode, Convert()), {"sound": str(sound), "document": str(document)})
    file_item, text_item = ret.result
    assert file_item["type"] == "file" and Path(file_item["content"]).read_bytes() == b"converted"
    assert Path(file_item["content"]).is_relative_to(agentlego_outputs)
    assert text_item == {"type": "text", "content": "a.wav + PK"}


@pytest.mark.parametrize(
    ("arguments", "state", "errmsg"),
    [
        ({"image": "/no/such/picture.png"}, ActionStatusCode.ARGS_ERROR, "No such file: '/no/such/picture.png'"),
        ({"image": "IMAGE", "times": "twice"}, ActionStatusCode.ARGS_ERROR, "invalid literal for int() with base 10"),
        ({"image": "IMAGE", "scale": 0}, ActionStatusCode.API_ERROR, "ValueError: "),  # PIL rejects a 0-wide image
        ({"picture": "IMAGE"}, ActionStatusCode.ARGS_ERROR, "unknown arguments: 'picture'"),
    ],
)
def test_errors_are_returns_for_the_model(
    mode: str, tmp_path: Path, arguments: dict[str, Any], state: ActionStatusCode, errmsg: str
) -> None:
    image = str(_red_left(tmp_path))
    ret = call_action(mode, wrap(mode, Flip()), {k: image if v == "IMAGE" else v for k, v in arguments.items()})
    assert ret.state == state and ret.result is None
    assert errmsg in ret.errmsg


def test_calculator_errors_and_results(mode: str) -> None:
    calculator = wrap(mode, Calculator())
    assert call_action(mode, calculator, {"expression": "sqrt(16) + max(2, 3)"}).result == [
        {"type": "text", "content": "7.0"}
    ]
    ret = call_action(mode, calculator, {"expression": "1 / 0"})
    assert (ret.state, ret.errmsg) == (ActionStatusCode.API_ERROR, "ZeroDivisionError: division by zero")


def test_a_make_tool_function_and_a_name_override(mode: str) -> None:
    @make_tool
    def multiply(a: int, b: int) -> int:
        """Multiply the input integers."""
        return a * b

    action = wrap(mode, multiply, name="times")
    assert action.name == "times" and action.description["description"] == "Multiply the input integers."
    assert [p["type"] for p in action.description["parameters"]] == ["NUMBER", "NUMBER"]
    assert call_action(mode, action, {"a": 6, "b": 7}).result == [{"type": "text", "content": "42"}]


def test_a_model_backed_tool_is_set_up_once_on_its_first_call(mode: str) -> None:
    class Loaded(BaseTool):
        default_desc = "Answer from a loaded model."
        setups = 0

        def setup(self) -> None:
            type(self).setups += 1
            self.model = threading.get_ident()

        def apply(self, question: str) -> str:
            return f"answer to {question}"

    action = wrap(mode, Loaded())
    assert Loaded.setups == 0
    for _ in range(3):
        assert call_action(mode, action, {"question": "q"}).result == [{"type": "text", "content": "answer to q"}]
    assert Loaded.setups == 1


def test_non_tools_are_refused() -> None:
    with pytest.raises(UserError, match="wraps an AgentLego tool"):
        AgentLegoTool(lambda: None)


def test_without_agentlego_the_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['agentlego'] = None\n"
        "from plait.actions import AgentLegoTool\n"
        "try:\n    AgentLegoTool(object())\nexcept ImportError as exc:\n    print(f'{type(exc).__name__}: {exc}')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert out.startswith("MissingDependencyError: AgentLegoTool needs the optional package 'agentlego")
    assert out.endswith("pip install 'plait[agentlego]'")
