"""Loading what a command line names: a module (dotted name or ``.py`` file) and ``MODULE:NAME``.

One way for every command: ``plait eval --agent``, ``plait eval --scorer``, ``plait mcp-serve``
and the web demo's ``--tools-from``. A dotted name is imported with the current folder
searched first (as ``python -m`` does); a ``.py`` path is imported once per process, its
folder joining `sys.path` so that it can import its neighbours.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from types import ModuleType

from ..exceptions import UserError

__all__ = ["import_source", "load_object"]

_FILES: dict[str, ModuleType] = {}
_FILES_LOCK = threading.Lock()


def import_source(spec: str) -> ModuleType:
    """The module `spec` names: a dotted module name, or the path of a ``.py`` file.

    Raises:
        ImportError: The module does not exist, or the path is not a Python file.
        Exception: Whatever the module raises while it is imported (it is the user's code).
    """
    if not spec.endswith(".py"):
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        return importlib.import_module(spec)
    path = os.path.abspath(spec)
    with _FILES_LOCK:
        if path in _FILES:
            return _FILES[path]
        name = "plait_user_" + os.path.splitext(os.path.basename(path))[0]
        found = importlib.util.spec_from_file_location(name, path) if os.path.isfile(path) else None
        if found is None or found.loader is None:
            raise ImportError(f"no Python file {spec!r}")
        module = importlib.util.module_from_spec(found)
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.append(folder)  # like a script run from there: the file may import its neighbours
        sys.modules[name] = module
        try:
            found.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        _FILES[path] = module
        return module


def load_object(spec: str, what: str) -> object:
    """The object ``MODULE:NAME`` names (``NAME`` may be dotted: ``module:Class.factory``).

    Args:
        spec: ``MODULE:NAME``; ``MODULE`` as `import_source` takes it.
        what: What the object is for, to start the error messages (``'--agent'``).

    Raises:
        UserError: `spec` is not ``MODULE:NAME``, the module does not import, or it has no such name.
    """
    module_name, _, name = spec.rpartition(":")
    if not module_name or not name:
        raise UserError(f"{what} must be MODULE:NAME (e.g. my_tools:server), got {spec!r}")
    try:
        module = import_source(module_name)
    except Exception as exc:  # the user's module: whatever it raises while importing is a settings error
        raise UserError(f"{what}: could not import {module_name!r}: {type(exc).__name__}: {exc}") from None
    target: object = module
    for part in name.split("."):
        if not hasattr(target, part):
            raise UserError(f"{what}: {module_name!r} has no {name!r}")
        target = getattr(target, part)
    return target
