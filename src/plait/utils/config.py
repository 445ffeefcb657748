"""Config dicts: ``{'type': cls | 'dotted.path' | callable, **kwargs}`` turned into objects.

Seed code passes components either as instances or as such dicts (``memory=dict(type=Memory)``);
`create_object` is the one place that resolves them.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Mapping
from typing import Any

from ..exceptions import UserError
from .names import check_keywords, keyword_names

__all__ = ["create_object", "load_class_from_string"]


def load_class_from_string(class_path: str, path: str | None = None) -> Any:
    """Import ``'package.module.Name'`` and return ``Name``.

    A bare name (no dot) is looked up among plait's public names (``'Memory'``,
    ``'AsyncIPythonInterpreter'``), then the registered tools.

    Args:
        class_path: Dotted path of the object.
        path: A directory to put on ``sys.path`` while importing (for user code).

    Raises:
        UserError: The path does not resolve.
    """
    if "." not in class_path:
        return _resolve_bare_name(class_path)
    module_name, _, attr = class_path.rpartition(".")
    added = path if path is not None and path not in sys.path else None
    if added is not None:
        sys.path.insert(0, added)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import {module_name!r} for {class_path!r}: {exc}") from exc
    finally:
        if added is not None:
            sys.path.remove(added)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UserError(f"module {module_name!r} has no attribute {attr!r}") from None


def _resolve_bare_name(name: str) -> object:
    import plait

    for namespace in ("plait", "plait.agents", "plait.actions", "plait.llms", "plait.memory", "plait.hooks"):
        module = plait if namespace == "plait" else importlib.import_module(namespace)
        try:
            return getattr(module, name)
        except AttributeError:
            continue
    raise UserError(f"{name!r} is not a plait name; give a dotted path such as 'mypkg.module.{name}'")


def create_object(config: object) -> Any:
    """Build an object from a config dict; anything that is not a dict is returned as is.

    Classes are instantiated with the remaining keys; other callables become a
    `functools.partial`. The caller's dict is never modified.

    Raises:
        UserError: The dict has no ``type`` key, ``type`` does not resolve, or a key is not a
            parameter of the class (the message names the closest one; a class taking
            ``**kwargs`` checks its own, as plait's models do).
    """
    if not isinstance(config, Mapping):
        return config
    if "type" not in config:
        raise UserError(f"a config dict needs a 'type' key (a class or dotted path); got keys {sorted(config)}")
    kwargs = dict(config)
    target: object = kwargs.pop("type")
    if isinstance(target, str):
        target = load_class_from_string(target)
    if isinstance(target, type):
        accepted = keyword_names(target)
        if accepted is not None:  # a class without **kwargs: a misspelt key is named here, not as a TypeError
            check_keywords(target.__name__, kwargs, accepted)
        return target(**kwargs)
    if callable(target):
        return functools.partial(target, **kwargs)
    raise UserError(f"config 'type' must be a class, a callable or a dotted path, not {type(target).__name__}")
