"""Names a package exports without importing them until first use (PEP 562 module ``__getattr__``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping

__all__ = ["lazy_attribute"]


def lazy_attribute(package: str, exports: Mapping[str, str], name: str) -> object:
    """Import `name` from its module in `exports` (``name -> module``, relative to `package`) and cache it.

    The body of a package's ``__getattr__``: the value is stored in the package's namespace,
    so the import happens once.

    Raises:
        AttributeError: `name` is not one of `exports`.
    """
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, package), name)
    setattr(sys.modules[package], name, value)
    return value
