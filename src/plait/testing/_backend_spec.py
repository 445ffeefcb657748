"""`BackendSpec`: how to open a session backend, in the test's process or in a child process."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..exceptions import UserError
from ..types import JSONValue

if TYPE_CHECKING:
    from ..memory.backend import SessionBackend

__all__ = ["ENVIRONMENT", "BackendSpec", "child", "opened"]

ENVIRONMENT = "PLAIT_SESSION_BACKEND"
"""The environment variable a child process finds its `BackendSpec` in (JSON)."""

_FACTORY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass(frozen=True)
class BackendSpec:
    """How to open one backend's store, as often as a check needs, in this process or another.

    Every `open` must reach the same stored sessions (the same file, the same database): that is
    how a check plays a restart, a second process or a second machine.

    Attributes:
        factory: ``"module:callable"`` returning a `SessionBackend` (``"plait.memory:SessionStore"``).
            It also takes the keyword options ``ttl``, ``max_sessions`` and ``sweep_every`` (the
            retention checks pass them) and ``shared`` (two workers taking turns on a session).
        args: Its positional arguments (JSON values: a file path, a DSN).
        kwargs: Its keyword arguments (JSON values).

    `args` and `kwargs` may hold a password: they are left out of the repr, and reach a child
    process through its environment, never its command line.
    """

    factory: str
    args: tuple[JSONValue, ...] = field(default=(), repr=False)
    kwargs: Mapping[str, JSONValue] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.factory, str) or not _FACTORY.fullmatch(self.factory):
            raise UserError(f"factory must be 'module:callable' ('plait.memory:SessionStore'), got {self.factory!r}")

    def open(self, **options: Any) -> SessionBackend:
        """A new store object on the backend (`options`: ``ttl``, ``max_sessions``, ``sweep_every``, ``shared``)."""
        module, name = self.factory.split(":")
        make = getattr(importlib.import_module(module), name)
        return cast("SessionBackend", make(*self.args, **{**self.kwargs, **options}))

    def environment(self) -> dict[str, str]:
        """The environment entry that hands this spec to a child process (`from_environment`)."""
        payload = {"factory": self.factory, "args": list(self.args), "kwargs": dict(self.kwargs)}
        return {ENVIRONMENT: json.dumps(payload)}

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> BackendSpec:
        """The spec a parent process handed over (`environment`)."""
        data = json.loads((os.environ if environ is None else environ)[ENVIRONMENT])
        return cls(data["factory"], tuple(data["args"]), data["kwargs"])


@contextlib.contextmanager
def opened(spec: BackendSpec, **options: Any) -> Iterator[SessionBackend]:
    """`spec.open(**options)`, closed on the way out."""
    store = spec.open(**options)
    try:
        yield store
    finally:
        store.close()


def child(spec: BackendSpec, *argv: str) -> subprocess.Popen[str]:
    """A child process running ``plait.testing._backend_child`` with `argv`, on the store `spec` opens.

    It imports what this process imports (its ``sys.path``), and reads the spec from its
    environment; its stdin and stdout are pipes (text).
    """
    path = os.pathsep.join(entry for entry in sys.path if entry)
    environment = {**os.environ, "PYTHONPATH": path, **spec.environment()}
    return subprocess.Popen(
        [sys.executable, "-m", "plait.testing._backend_child", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
    )
