"""The custom tools of seeds 001 (EnvChecker) and 002 (WeatherQuery), written exactly as in the seeds,
and seed 000's CodeProcessor hook pattern."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest
from _action_support import call_action, call_executor, make_executor

from plait.actions import BaseAction, tool_api
from plait.hooks import Hook
from plait.schema import ActionReturn, ActionStatusCode, AgentMessage

# Lagent 0.5.x's JsonParser hint (issue 38).
JSON_HINT = (
    "If you call this tool, you must pass arguments in the JSON format {key: value}, "
    "where the key is the parameter name."
)
SEED_TOOLS = Path(__file__).resolve().parent.parent / "fixtures" / "seed_tools"


def load_seed_module(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"seed_tools_{name}", SEED_TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- seed 002: WeatherQuery against a local QWeather-shaped server ------------------------------------------
# Shapes follow QWeather's documented responses: GeoAPI city lookup (/v2/city/lookup) and real-time weather
# (/v7/weather/now); values are strings, as in the real API.
CITY_LOOKUP = {
    "code": "200",
    "location": [
        {
            "name": "北京",
            "id": "101010100",
            "lat": "39.90499",
            "lon": "116.40529",
            "adm2": "北京",
            "adm1": "北京市",
            "country": "中国",
            "tz": "Asia/Shanghai",
            "utcOffset": "+08:00",
            "isDst": "0",
            "type": "city",
            "rank": "10",
            "fxLink": "https://www.qweather.com/weather/beijing-101010100.html",
        }
    ],
    "refer": {"sources": ["QWeather"], "license": ["QWeather Developers License"]},
}
WEATHER_NOW = {
    "code": "200",
    "updateTime": "2024-05-01T10:12+08:00",
    "fxLink": "https://www.qweather.com/weather/beijing-101010100.html",
    "now": {
        "obsTime": "2024-05-01T10:04+08:00",
        "temp": "24",
        "feelsLike": "26",
        "icon": "101",
        "text": "多云",
        "wind360": "123",
        "windDir": "东南风",
        "windScale": "1",
        "windSpeed": "3",
        "humidity": "72",
        "precip": "0.0",
        "pressure": "1003",
        "vis": "16",
        "cloud": "10",
        "dew": "21",
    },
    "refer": {"sources": ["QWeather"], "license": ["QWeather Developers License"]},
}


class FakeQWeather(BaseHTTPRequestHandler):
    """Routes: /v2/city/lookup and /v7/weather/now; the key 'bad-key' gets 401, location 'nowhere' no city."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        FakeQWeather.requests.append({"path": url.path, **query})
        if query.get("key") == "bad-key":
            self._send(401, {"code": "401"})
        elif url.path == "/v2/city/lookup":
            found = query.get("location") != "nowhere"
            self._send(200, CITY_LOOKUP if found else {"code": "404", "location": []})
        elif url.path == "/v7/weather/now" and query.get("location") == "101010100":
            self._send(200, WEATHER_NOW)
        else:
            self._send(404, {"code": "404"})

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def qweather() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), FakeQWeather)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def weather_cls(monkeypatch: pytest.MonkeyPatch) -> Any:
    pytest.importorskip("requests")
    monkeypatch.setenv("WEATHER_API_KEY", "test-key")
    return load_seed_module("weather").WeatherQuery


def point_at(tool: Any, base: str) -> Any:
    tool.location_query_url = f"{base}/v2/city/lookup"
    tool.weather_query_url = f"{base}/v7/weather/now"
    return tool


def test_weather_description(weather_cls: Any) -> None:
    tool = weather_cls()
    assert tool.description == {
        "name": "WeatherQuery",
        "description": "一个天气查询API。可以根据城市名查询天气信息。",
        "parameters": [{"name": "query", "type": "STRING", "description": "The city name to query."}],
        "required": ["query"],
        "parameter_description": JSON_HINT,
    }


def test_weather_success(mode: str, weather_cls: Any, qweather: str) -> None:
    executor = make_executor(mode, actions=[point_at(weather_cls(), qweather)])
    ret = call_executor(executor, "WeatherQuery", '{"query": "北京"}')
    assert ret.state == ActionStatusCode.SUCCESS and ret.type == "WeatherQuery" and ret.args == {"query": "北京"}
    text = ret.format_result()
    assert text.splitlines() == [
        "数据观测时间: 2024-05-01T10:04+08:00",
        "温度: 24°C",
        "体感温度: 26°C",
        "天气: 多云",
        "风向: 东南风，角度为 123°",
        "风力等级: 1，风速为 3 km/h",
        "相对湿度: 72",
        "当前小时累计降水量: 0.0 mm",
        "大气压强: 1003 百帕",
        "能见度: 16 km",
    ]
    assert {"path": "/v2/city/lookup", "key": "test-key", "location": "北京"} in FakeQWeather.requests


def test_weather_http_errors(mode: str, weather_cls: Any, qweather: str) -> None:
    tool = point_at(weather_cls(), qweather)
    ret = call_action(mode, tool, {"query": "nowhere"})
    assert ret.state == ActionStatusCode.HTTP_ERROR and ret.errmsg == "未查询到城市"
    unreachable = point_at(weather_cls(), "http://127.0.0.1:9")  # nothing listens on the discard port
    ret = call_action(mode, unreachable, {"query": "北京"})
    assert ret.state == ActionStatusCode.HTTP_ERROR and ret.errmsg and ret.result is None


def test_weather_api_error(mode: str, weather_cls: Any, qweather: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEATHER_API_KEY", "bad-key")
    ret = call_action(mode, point_at(weather_cls(), qweather), {"query": "北京"})
    assert ret.state == ActionStatusCode.API_ERROR and ret.errmsg == "401"


def test_weather_needs_a_key(weather_cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEATHER_API_KEY")
    with pytest.raises(ValueError, match="WEATHER_API_KEY"):
        weather_cls()


# ---- seed 001: EnvChecker ---------------------------------------------------------------------------------
def test_env_checker_description() -> None:
    checker = load_seed_module("env_checker").EnvChecker()
    assert checker.description == {
        "name": "EnvChecker",
        "description": "检查深度学习环境的插件",
        "api_list": [
            {
                "name": "check_torch_env",
                "description": "获取PyTorch相关环境信息",
                "parameters": [],
                "required": [],
                "parameter_description": JSON_HINT,
            }
        ],
    }


def test_env_checker_without_torch(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails even where torch is installed
    executor = make_executor(mode, actions=[load_seed_module("env_checker").EnvChecker()])
    ret = call_executor(executor, "EnvChecker.check_torch_env", "{}")
    assert ret.state == ActionStatusCode.API_ERROR and ret.result is None
    assert ret.errmsg.startswith("Error checking environment:") and "torch" in ret.errmsg


def test_env_checker_with_a_fake_torch(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0)
    fake = types.SimpleNamespace(__version__="9.9.9", cuda=cuda)
    monkeypatch.setitem(sys.modules, "torch", fake)
    executor = make_executor(mode, actions=[load_seed_module("env_checker").EnvChecker()])
    ret = call_executor(executor, "EnvChecker.check_torch_env", {})
    assert ret.state == ActionStatusCode.SUCCESS
    text = ret.format_result()
    assert "PyTorch Version: 9.9.9" in text and "=== System Information ===" in text


# ---- seed 000: the CodeProcessor hook pattern (verbatim) ---------------------------------------------------------
# fmt: off
class CodeProcessor(Hook):
    def before_action(self, executor, message, session_id):  # type: ignore[no-untyped-def]
        message = message.copy(deep=True)
        message.content = dict(
            name='IPythonInteractive', parameters={'command': message.formatted['action']}
        )
        return message

    def after_action(self, executor, message, session_id):  # type: ignore[no-untyped-def]
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
# fmt: on


class IPythonInteractive(BaseAction, register=False):  # not registered: it must not shadow the real tool
    """Stand-in for the interpreter: runs the code, returns the last printed line."""

    @tool_api
    def run(self, command: str) -> str:
        """Run Python code.

        Args:
            command: the code
        """
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(command, {})
        return out.getvalue().strip()


CODE = (
    "def find_numbers():\n    # 正因数\n    positive_factors = [1, 3, 7, 9, 21, 63]\n    # 负因数\n"
    "    negative_factors = [-1, -3, -7, -9, -21, -63]\n    \n    # 找到与正因数相乘的结果为63的数\n"
    "    positive_numbers = [63 / factor for factor in positive_factors]\n    # 找到与负因数相乘的结果为63的数\n"
    "    negative_numbers = [-63 / factor for factor in negative_factors]\n    \n    # 计算两个数的乘积\n"
    "    product = positive_numbers[0] * negative_numbers[0]\n    \n    return product\n\n"
    "result = find_numbers()\nprint(result)"
)


def test_code_processor_pattern(mode: str) -> None:
    executor = make_executor(mode, actions=[IPythonInteractive()], hooks=[CodeProcessor()])
    bot_msg = AgentMessage(
        sender="Agent",
        content="首先,我们需要...",
        formatted={
            "tool_type": "code interpreter",
            "thought": "首先,我们需要...",
            "action": CODE,
            "status": 1,
        },
    )
    executor_msg = call_executor(executor, bot_msg)
    assert str(executor_msg) == (
        "content='3969.0' sender='ActionExecutor' formatted=None extra_info=None type=None receiver=None "
        "stream_state=<AgentStatusCode.END: 0>"
    )
    assert bot_msg.content == "首先,我们需要..."  # the hook copied before changing it
    bad = bot_msg.model_copy(update={"formatted": {**bot_msg.formatted, "action": "1/0"}})
    assert call_executor(executor, bad).content == "ZeroDivisionError: division by zero"
