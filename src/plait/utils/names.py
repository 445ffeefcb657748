"""Misspelt names caught where they are given: the closest valid name, and unknown keyword arguments.

`did_you_mean` is the one place a "did you mean ...?" hint is worded; `check_keywords`
refuses keyword arguments a class would otherwise accept silently (``temprature=0.1``
landing in a model's ``**gen_params``), naming the closest valid one.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Collection, Iterable

from ..exceptions import UserError

__all__ = ["check_keywords", "did_you_mean", "init_parameters", "keyword_names"]


def did_you_mean(name: str, choices: Iterable[str], *, n: int = 1, cutoff: float = 0.6) -> str:
    """``"did you mean 'x'?"`` (``'x', 'y'?`` for several) for the `n` choices closest to `name`; ``""`` when none is.

    Args:
        name: What was given.
        choices: The valid names (their order breaks ties between equally close ones).
        n: How many close names to offer at most.
        cutoff: How close a name must be (`difflib.get_close_matches`' ratio, 0 to 1).
    """
    close = difflib.get_close_matches(name, list(dict.fromkeys(choices)), n=n, cutoff=cutoff)
    return f"did you mean {', '.join(map(repr, close))}?" if close else ""


def init_parameters(cls: type) -> list[str]:
    """The keyword parameters of the constructors along `cls`'s MRO (not ``self``, ``*args``, ``**kwargs``).

    A class that forwards ``**kwargs`` to its base accepts the base's names too, so the
    whole chain is read.
    """
    names: list[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        try:
            parameters = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):  # a builtin or extension type without a signature
            continue
        for parameter in parameters:
            kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
            if parameter.kind in kinds and parameter.name != "self" and parameter.name not in names:
                names.append(parameter.name)
    return names


def keyword_names(func: object) -> frozenset[str] | None:
    """The names `func` takes as keywords; None when it takes any (``**kwargs``) or has no readable signature."""
    try:
        parameters = inspect.signature(func).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in kinds and p.name != "self")


def check_keywords(owner: str, given: Iterable[str], valid: Collection[str], suggest: Iterable[str] = ()) -> None:
    """Refuse the first name of `given` that is not in `valid`, naming the closest valid one.

    Args:
        owner: Who was given them, for the message (``'GPTAPI'``).
        given: The keyword names received.
        valid: The names accepted.
        suggest: More names to suggest from (e.g. the constructor's own parameters, which
            never reach ``**kwargs`` but are the likeliest intended spelling).

    Raises:
        UserError: ``GPTAPI got an unknown keyword argument 'temprature'; did you mean 'temperature'?``
    """
    for name in given:
        if name not in valid:
            hint = did_you_mean(name, [*valid, *suggest])
            raise UserError(f"{owner} got an unknown keyword argument {name!r}" + (f"; {hint}" if hint else ""))
