"""Seed 003's "Dynamic Invocation" example with the real ArxivSearch and IPythonInterpreter."""

from __future__ import annotations

from plait import ActionExecutor, ArxivSearch, IPythonInterpreter

# Lagent 0.5.x's text (the seed prints the older Chinese one; issue 38).
PARAMETER_DESCRIPTION = (
    "If you call this tool, you must pass arguments in the JSON format {key: value}, "
    "where the key is the parameter name."
)


def test_executor_flattens_names_and_runs_the_interpreter() -> None:
    executor = ActionExecutor(actions=[ArxivSearch(), IPythonInterpreter()])
    try:
        info = executor.get_actions_info()
        assert info[0] == {
            "name": "ArxivSearch.get_arxiv_article_information",
            "description": "Run Arxiv search and get the article meta information.",
            "parameters": [{"name": "query", "type": "STRING", "description": "the content of search query"}],
            "required": ["query"],
            "return_data": [{"name": "content", "description": "a list of 3 arxiv search papers", "type": "STRING"}],
            "parameter_description": PARAMETER_DESCRIPTION,
        }
        assert info[1]["name"] == "IPythonInterpreter"
        assert info[1]["parameters"] == [
            {"name": "command", "type": "STRING", "description": "Python code"},
            {
                "name": "timeout",
                "type": "NUMBER",
                "description": "Upper bound of waiting time for Python script execution.",
            },
        ]
        assert info[1]["required"] == ["command"] and info[1]["parameter_description"] == PARAMETER_DESCRIPTION
        ret = executor("IPythonInterpreter", '{"command": "import math;math.sqrt(100)"}')
        assert ret.result == [{"type": "text", "content": "10.0"}]
    finally:
        executor.actions["IPythonInterpreter"].shutdown()
