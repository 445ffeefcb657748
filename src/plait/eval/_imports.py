"""Loading what the command line names as ``MODULE:NAME`` (an agent factory, a scorer)."""

from __future__ import annotations

import importlib
import os
import sys

from ..exceptions import UserError

__all__ = ["load_object"]


def load_object(spec: str, what: str) -> object:
    """The object ``MODULE:NAME`` names, imported with the current directory on ``sys.path``.

    Raises:
        UserError: Not ``MODULE:NAME``, the module does not import, or it has no such name.
    """
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise UserError(f"{what} must be MODULE:NAME (a module importable from here), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: whatever it raises while importing is a settings error
        raise UserError(f"{what} {spec!r}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    target: object = module
    for part in name.split("."):
        if not hasattr(target, part):
            raise UserError(f"{what} {spec!r}: {module_name} has no {name!r}")
        target = getattr(target, part)
    return target
