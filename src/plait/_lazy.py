"""Names a package exports without importing them until first use (PEP 562 module ``__getattr__``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping

__all__ = ["lazy_attribute", "lazy_module"]


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


def lazy_module(
    package: str, exports: Mapping[str, str], names: Iterable[str] = ()
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for its lazy `exports` (and its eager `names`).

    Example:
        ```python
        __getattr__, __dir__ = lazy_module(__name__, {"BINGMap": ".bing_map"}, __all__)
        ```
    """
    listed = sorted({*names, *exports})

    def getattr_(name: str) -> object:
        return lazy_attribute(package, exports, name)

    def dir_() -> list[str]:
        return list(listed)

    return getattr_, dir_
