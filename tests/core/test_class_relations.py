"""The class relations users rely on stay as they are.

`isinstance(AsyncReAct(...), ReAct)`, `isinstance(agent, Agent)` and the like are part of the
API: plait's sync and async classes are siblings over shared cores (no async method overrides
a sync one), and the relations Lagent users check are kept by ABC registration. The expected
table (`tests/golden/classes/agents.json`) was written from the classes as they were before
the split; regenerate it only for a deliberate change (``PLAIT_GOLDEN_UPDATE=1``).
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any

import plait.agents

TABLE = Path(__file__).resolve().parent.parent / "golden" / "classes" / "agents.json"


def _exported(module: Any) -> dict[str, type]:
    return {name: obj for name in module.__all__ if inspect.isclass(obj := getattr(module, name))}


def _table() -> dict[str, Any]:
    classes = _exported(plait.agents)
    agents = {n: c for n, c in classes.items() if issubclass(c, plait.agents.AgentModule)}
    subclass = {a: sorted(b for b, cb in agents.items() if issubclass(ca, cb)) for a, ca in sorted(agents.items())}
    kinds = {}
    for name, cls in sorted(agents.items()):
        call = cls.__call__
        kinds[name] = (
            "asyncgen"
            if inspect.isasyncgenfunction(call)
            else "coroutine"
            if inspect.iscoroutinefunction(call)
            else "generator"
            if inspect.isgeneratorfunction(call)
            else "function"
        )
    return {"issubclass": subclass, "call": kinds}


def test_agent_class_relations_are_unchanged() -> None:
    table = _table()
    if os.environ.get("PLAIT_GOLDEN_UPDATE"):
        TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", "utf-8")
    assert table == json.loads(TABLE.read_text("utf-8"))
