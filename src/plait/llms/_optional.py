"""Optional backend dependencies, imported when a model first needs them."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..exceptions import MissingDependencyError

__all__ = ["import_optional"]


def import_optional(module: str, extra: str, feature: str) -> ModuleType:
    """Import `module`, or raise `MissingDependencyError` naming the plait `extra` that installs it.

    Args:
        module: The module to import (``'vllm'``).
        extra: The plait extra that provides it (``pip install 'plait[extra]'``).
        feature: What needs it, for the message (``'VllmModel'``).
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(module, extra=extra, feature=feature) from None
