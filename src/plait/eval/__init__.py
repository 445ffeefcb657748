"""Evaluating agents over data sets, and their trajectories as fine-tuning data.

```python
from plait.eval import evaluate, export

summary = evaluate("my_agents:make_agent", "capitals.jsonl", "runs/capitals", concurrency=8)
print(summary["pass_rate"])
export("runs/capitals", "train.jsonl", only_passed=True)   # OpenAI fine-tuning chat JSONL
```

The same from the command line: ``plait eval DATA.jsonl --agent MODULE:FACTORY --out DIR`` and
``plait export DIR -o FILE``. Modules: `cases` (the data set), `scorers`, `case_runner` (one
agent, a session per case), `results` (``results.jsonl``, safe against kill -9), `runner`
(`evaluate`), `ray_runner` (``ray=True``), `progress`; the exports are `plait.trajectories.export`.
``import plait`` does not import this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_module

if TYPE_CHECKING:
    from ..trajectories.export import export, to_openai, to_sharegpt
    from ..trajectories.from_eval import native_messages
    from .case_runner import AgentFactory, CaseRunner, agent_profile
    from .cases import Case, load_cases
    from .runner import aevaluate, evaluate, summarise
    from .scorers import Scorer, contains, exact, load_scorer, regex

# public name -> module that defines it (imported on first use: ``plait eval --help`` stays fast)
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["AgentFactory", "CaseRunner", "agent_profile"], ".case_runner"),
    **dict.fromkeys(["Case", "load_cases"], ".cases"),
    **dict.fromkeys(["export", "to_openai", "to_sharegpt"], "..trajectories.export"),
    "native_messages": "..trajectories.from_eval",
    **dict.fromkeys(["aevaluate", "evaluate", "summarise"], ".runner"),
    **dict.fromkeys(["Scorer", "contains", "exact", "load_scorer", "regex"], ".scorers"),
}

__all__ = [
    "AgentFactory",
    "Case",
    "CaseRunner",
    "Scorer",
    "aevaluate",
    "agent_profile",
    "contains",
    "evaluate",
    "exact",
    "export",
    "load_cases",
    "load_scorer",
    "native_messages",
    "regex",
    "summarise",
    "to_openai",
    "to_sharegpt",
]

__getattr__, __dir__ = lazy_module(__name__, _EXPORTS, __all__)
