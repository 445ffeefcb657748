from __future__ import annotations

import functools
import logging

import pytest

from plait.exceptions import MissingDependencyError, UserError
from plait.hooks import MessageLogger
from plait.memory import Memory
from plait.schema import AgentMessage
from plait.utils import create_object, load_class_from_string


def test_create_object_resolves_classes_paths_and_callables() -> None:
    assert create_object(5) == 5
    cfg = {"type": "plait.memory.Memory", "recent_n": 2}
    memory = create_object(cfg)
    assert isinstance(memory, Memory) and memory.recent_n == 2
    assert cfg == {"type": "plait.memory.Memory", "recent_n": 2}
    assert isinstance(create_object({"type": "Memory"}), Memory)
    partial = create_object({"type": max, "default": 0})
    assert isinstance(partial, functools.partial) and partial([]) == 0
    with pytest.raises(UserError, match="'type'"):
        create_object({"recent_n": 1})
    with pytest.raises(UserError, match="cannot import"):
        load_class_from_string("no_such_pkg.Thing")
    with pytest.raises(UserError, match="has no attribute"):
        load_class_from_string("plait.memory.Nope")
    with pytest.raises(UserError, match="not a plait name"):
        load_class_from_string("Nope")


def test_missing_dependency_error_is_actionable() -> None:
    err = MissingDependencyError("xllamacpp", extra="local", feature="LlamaCppModel")
    assert isinstance(err, ImportError) and isinstance(err, UserError)
    assert "pip install 'plait[local]'" in str(err) and "LlamaCppModel" in str(err)


def test_message_logger_logs_without_duplicate_handlers(caplog: pytest.LogCaptureFixture) -> None:
    first = MessageLogger(name="plait.test_logger", add_handler=True)
    MessageLogger(name="plait.test_logger", add_handler=True)
    assert len(first.logger.handlers) == 1
    with caplog.at_level(logging.INFO, logger="plait.test_logger"):
        first.before_agent(None, [AgentMessage(content="hello")], 3)
        first.after_action(None, AgentMessage(sender="ActionExecutor", content="done"), 3)
    assert "agent-in" in caplog.text and "user: hello" in caplog.text and "session=3" in caplog.text
    assert "ActionExecutor: done" in caplog.text
    first.logger.handlers.clear()
