"""Seed 000's DataVisualizer: a researcher with WebBrowser("BingSearch") and a charter with IPythonInterpreter.

The agent code is the seed's (it lives in examples/data_visualizer.py); only the model (a scripted
one, shared by both agents as in the seed) and the Bing endpoint (a fake server on 127.0.0.1) differ.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _web_support import fixture_json, page

from plait.actions.web_browser import WebBrowser
from plait.schema import AgentMessage
from plait.testing import ScriptedLLM
from plait.testing.fake_http import Canned, FakeHTTPServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from data_visualizer import DataVisualizer

GDP = {2019: 14.28, 2020: 14.69, 2021: 17.73, 2022: 17.88, 2023: 17.79}


@pytest.fixture
def bing() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as server:
        answer = fixture_json("bing_web_search.json")
        template = answer["webPages"]["value"][0]
        answer["webPages"]["value"] = [{**template, "url": server.url("/gdp"), "name": "China GDP 2019-2023",
                                        "snippet": "Gross domestic product of China, trillion US dollars"}]  # fmt: skip
        server.route("GET", "/v7.0/search", Canned.json(answer))
        rows = "".join(f"<tr><td>{year}</td><td>{value}</td></tr>" for year, value in GDP.items())
        server.route("GET", "/gdp", Canned.html(page("China GDP", "GDP in trillion USD:") + f"<table>{rows}</table>"))
        yield server


def test_data_visualizer_runs_end_to_end(bing: FakeHTTPServer, tmp_path: Any) -> None:
    search = '```json\n{"name": "WebBrowser.search", "parameters": {"query": ["China GDP past 5 years"]}}\n```\n'
    select = '```json\n{"name": "WebBrowser.select", "parameters": {"select_ids": [0]}}\n```\n'
    code = "```python\nvalues = [14.28, 14.69, 17.73, 17.88, 17.79]\nprint(f'{max(values):.2f}')\n```\n"
    llm = ScriptedLLM([
        "I will search the web first.\n" + search,
        "The first result looks right; reading it.\n" + select,
        "GDP (trillion USD): 2019 14.28, 2020 14.69, 2021 17.73, 2022 17.88, 2023 17.79. Chart generator, over to you.",
        "Plotting the series.\n" + code,
        "Final Answer: the line graph is drawn; the peak is 17.88 trillion USD in 2022.",
    ])  # fmt: skip
    browser = WebBrowser("BingSearch", api_key="YOUR_BING_API_KEY", endpoint=bing.url("/v7.0/search"),
                         fetch_allow=["127.0.0.1"])  # fmt: skip
    visualizer = DataVisualizer(
        llm, browser,
        research_prompt="You should provide accurate data for the chart generator to use.",
        chart_prompt="Any charts you display will be visible by the user.",
    )  # fmt: skip
    try:
        user_msg = AgentMessage(
            sender="user",
            content="Fetch the China's GDP over the past 5 years, then draw a line graph of it. "
            "Once you code it up, finish.",
        )
        bot_msg = visualizer(user_msg)
    finally:
        visualizer.executor.actions["IPythonInterpreter"].shutdown()

    assert bot_msg.content.startswith("Final Answer")
    llm.assert_complete()
    # The researcher saw the tools' descriptions, the search results and the page text.
    system = llm.calls[0].messages[0]["content"]
    assert '"name": "WebBrowser.search"' in system and '"name": "WebBrowser.select"' in system
    researcher_memory = visualizer.state_dict()["researcher.memory"]
    observations = [m["content"] for m in researcher_memory if m["sender"] == "ActionExecutor"]
    assert "China GDP 2019-2023" in observations[0] and bing.url("/gdp") in observations[0]
    assert "2022 17.88" in observations[1]
    assert bing.requests_to("/v7.0/search")[0].param("q") == "China GDP past 5 years"
    # The charter's code ran in the interpreter.
    charter_memory = visualizer.state_dict()["charter.memory"]
    assert [m["content"] for m in charter_memory if m["sender"] == "ActionExecutor"] == ["17.88"]
