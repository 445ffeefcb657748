"""Build tool descriptions from functions (signature + Google docstring) and from classes."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..exceptions import UserError
from ..types import JSONValue
from ._docstring import DocEntry, parse_docstring, parse_entries
from ._types import TypeDescription, describe_annotation, describe_type_string, split_annotated

__all__ = ["SESSION_PARAMETER", "build_api_description", "build_class_description"]

SESSION_PARAMETER = "session_id"
"""An API parameter with this name receives the caller's session id and is hidden from the model."""

_EMPTY = inspect.Parameter.empty


def _resolve_hint(hint: object, namespace: Mapping[str, object]) -> object:
    """Evaluate one string annotation; unresolvable ones stay strings (read like docstring types)."""
    if not isinstance(hint, str):
        return hint
    try:
        return eval(hint, dict(namespace))  # the function's own annotation, as get_type_hints does
    except Exception:  # NameError for names only imported under TYPE_CHECKING, SyntaxError, ...
        return hint


def _type_hints(fn: Callable[..., object]) -> dict[str, object]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # some string annotation does not resolve: resolve them one by one
        namespace = getattr(fn, "__globals__", {})
        hints = dict(getattr(fn, "__annotations__", {}) or {})
        return {name: _resolve_hint(hint, namespace) for name, hint in hints.items()}


def _typed(hint: object, doc_type: str | None) -> TypeDescription:
    typed = describe_annotation(hint) if hint is not _EMPTY else {}
    if not typed and doc_type:
        typed = describe_type_string(doc_type)
    return typed


def _parameter(param: inspect.Parameter, hint: object, entry: DocEntry | None) -> dict[str, JSONValue]:
    description = entry.description if entry else ""
    if hint is not _EMPTY:
        hint, annotated = split_annotated(hint)
        if annotated:
            description = annotated
    typed = _typed(hint, entry.annotation if entry else None)
    parameter: dict[str, JSONValue] = {
        "name": param.name,
        "type": typed.pop("type", "STRING"),
        "description": description,
    }
    parameter.update(typed)
    return parameter


def _return_item(entry: DocEntry, hint: object = _EMPTY) -> dict[str, JSONValue]:
    item: dict[str, JSONValue] = {}
    if entry.name:
        item["name"] = entry.name
    item["description"] = entry.description
    typed = describe_type_string(entry.annotation) if entry.annotation else {}
    if not typed and hint is not _EMPTY:
        typed = describe_annotation(hint)
    item.update(typed)
    return item


def _explode(entry: DocEntry) -> list[dict[str, JSONValue]]:
    lines = ["    " + line.lstrip(" -+*#.") for line in entry.description.split("\n")[1:] if line.strip()]
    return [_return_item(item) for item in parse_entries(lines) if item.name]


def _included(name: str, include: Iterable[str] | None, exclude: Iterable[str] | None) -> bool:
    if name == SESSION_PARAMETER:
        return False
    if include is not None and name not in include:
        return False
    return not (exclude is not None and name in exclude)


def build_api_description(
    fn: Callable[..., object],
    *,
    name: str | None = None,
    explode_return: bool = False,
    returns_named_value: bool = False,
    include_arguments: Iterable[str] | None = None,
    exclude_arguments: Iterable[str] | None = None,
) -> dict[str, JSONValue]:
    """The description dict of one API: ``{name, description, parameters, required[, return_data]}``.

    Type hints win over docstring types; ``self``/``cls``, ``*args``/``**kwargs`` and a
    ``session_id`` parameter are left out.
    """
    include = None if include_arguments is None else set(include_arguments)
    exclude = None if exclude_arguments is None else set(exclude_arguments)
    doc = parse_docstring(getattr(fn, "__doc__", None), returns_named_value=returns_named_value)
    parameters: list[dict[str, JSONValue]] = []
    required: list[str] = []
    description: dict[str, JSONValue] = {
        "name": name or getattr(fn, "__name__", type(fn).__name__),
        "description": doc.description,
        "parameters": parameters,
        "required": required,
    }
    hints = _type_hints(fn)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise UserError(f"cannot read the signature of {fn!r}: {exc}") from exc
    for index, param in enumerate(signature.parameters.values()):
        if index == 0 and param.name in ("self", "cls"):
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or not _included(param.name, include, exclude):
            continue
        hint = hints.get(param.name, param.annotation)
        parameters.append(_parameter(param, hint, doc.args.get(param.name)))
        if param.default is _EMPTY:
            required.append(param.name)
    return_data: list[dict[str, JSONValue]] = []
    if explode_return and doc.returns:
        return_data = _explode(doc.returns[0])
    elif returns_named_value:
        hint = hints.get("return", _EMPTY) if len(doc.returns) == 1 else _EMPTY
        return_data = [_return_item(entry, hint) for entry in doc.returns]
    if return_data:
        description["return_data"] = return_data
    return description


def _own_doc(cls: type, twins: tuple[type, ...]) -> str:
    doc = cls.__dict__.get("__doc__")
    if doc:
        return parse_docstring(doc).description
    for base in (*cls.__mro__[1:], *twins):
        inherited = base.__dict__.get("__tool_description__")
        if isinstance(inherited, dict) and base.__dict__.get("__doc__") and not base.__dict__.get("_plait_base", False):
            return str(inherited.get("description", ""))
    return ""


def _collect_apis(
    cls: type, wrap: Callable[[Callable[..., object]], Callable[..., object]], twins: tuple[type, ...]
) -> dict[str, Any]:
    """The tool_api methods of `cls` by name, base classes (then `twins`) first, overrides resolved.

    A method without a docstring that overrides an API of a base class, or has the name of
    an API of a twin (the sync class of an async sibling), takes that API's description.
    """
    lineage = [klass for twin in twins for klass in twin.__mro__] + list(cls.__mro__)
    names: list[str] = []
    for klass in reversed(lineage):
        for attr, value in klass.__dict__.items():
            if hasattr(_unwrap(value), "api_description") and attr not in names:
                names.append(attr)
    apis: dict[str, Any] = {}
    for attr in names:
        value = _unwrap(inspect.getattr_static(cls, attr, None))
        if not callable(value):
            continue  # overridden with a non-callable (or absent from a sibling): no longer an API
        if not hasattr(value, "api_description"):
            base = next(
                _unwrap(k.__dict__[attr])
                for k in (*cls.__mro__, *lineage)
                if attr in k.__dict__ and hasattr(_unwrap(k.__dict__[attr]), "api_description")
            )
            value = wrap(value) if value.__doc__ else _inherit(value, base)
        apis[attr] = value
    return apis


def _inherit(value: Any, base: Any) -> Any:
    value.api_description = dict(base.api_description, name=value.__name__)
    return value


def _unwrap(value: object) -> object:
    return value.__func__ if isinstance(value, (staticmethod, classmethod)) else value


def build_class_description(
    cls: type, wrap: Callable[[Callable[..., object]], Callable[..., object]], twins: tuple[type, ...] = ()
) -> tuple[dict[str, Any], bool]:
    """``(__tool_description__, is_toolkit)`` for an action class.

    A class whose only API is ``run`` (decorated or not) is a simple tool; a class with other
    `tool_api` methods is a toolkit. Having both is an error. `twins` are classes whose API
    descriptions the class's undocumented methods of the same names take (see `_collect_apis`).
    """
    description: dict[str, Any] = {"name": cls.__name__, "description": _own_doc(cls, twins)}
    apis = _collect_apis(cls, wrap, twins)
    run = apis.pop("run", None)
    if run is not None and apis:
        raise UserError(
            f"{cls.__name__} defines both `run` and other tool APIs ({', '.join(apis)}); a simple tool implements "
            "only `run`, a toolkit only named tool_api methods"
        )
    if apis:
        description["api_list"] = [dict(fn.api_description) for fn in apis.values()]
        return description, True
    if run is None:
        candidate = _unwrap(inspect.getattr_static(cls, "run", None))
        if callable(candidate):
            run = wrap(candidate)  # tool_api marks the function in place
    if run is None:
        description.update(parameters=[], required=[])
        return description, False
    api = run.api_description
    if api.get("description"):
        description["description"] = api["description"]
    description["parameters"] = api["parameters"]
    description["required"] = api["required"]
    if api.get("return_data"):
        description["return_data"] = api["return_data"]
    return description, False
