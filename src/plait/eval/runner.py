"""`evaluate`: run an agent over a data set, score each answer, keep the results as they happen.

```python
from plait.eval import evaluate

summary = evaluate("my_agents:make_agent", "capitals.jsonl", "runs/capitals", concurrency=8)
print(summary["pass_rate"])
```

One agent object (from the zero-argument factory) answers every case, each in its own
session (`CaseRunner`); up to `concurrency` cases are in flight at once (sync agents on
worker threads, async ones on the event loop). Each finished case is appended to
``OUT/results.jsonl`` at once (`ResultsFile`); ``OUT/summary.json`` holds the totals and the
agent's profile (its tools' JSON Schemas, for `plait.eval.export`). Run it again with the
same `out_dir` and only the cases not in ``results.jsonl`` run. One run at a time uses an
`out_dir` (`OutputLock`): a second one fails at once, naming the first. A case that fails (the agent
raises, the time runs out, the scorer raises) is recorded with its error; the run goes on.
With ``ray=True`` the cases are answered by a pool of Ray actors instead
(`plait.eval.ray_runner`), with the same files. With ``samples=K`` each case runs K times,
each sample with its own seed (`rollouts`), recorded and resumed one by one; every record is
one rewarded trajectory (`plait.trajectories.from_eval`), so ``results.jsonl`` stays the one
source of truth and ``plait export`` writes the trajectories.
"""

from __future__ import annotations

import asyncio
import os
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO, Union

from ..exceptions import UserError
from ..trajectories.from_eval import from_eval
from ..trajectories.rewards import RewardFn, load_reward, reward_of
from ..types import JSONValue
from .case_runner import AgentFactory, CaseRunner
from .cases import Case, CaseId, CasesLike, case_key, load_cases
from .lock import OutputLock
from .progress import Progress
from .results import SUMMARY, ResultsFile, write_json
from .scorers import Scorer, load_scorer, score

__all__ = ["Backend", "LocalBackend", "Rollout", "aevaluate", "evaluate", "rollouts", "summarise"]


class Backend(Protocol):
    """What answers the cases: a local `CaseRunner`, or a pool of Ray actors."""

    async def describe(self) -> dict[str, JSONValue]:
        """The agent's profile (`agent_profile`)."""
        ...

    async def run(
        self,
        case_id: CaseId,
        text: str,
        timeout: float | None,
        sample: int | None = None,
        gen: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One case's answer (`CaseRunner.run`)."""
        ...

    def close(self) -> None:
        """Release what the backend holds."""
        ...


class LocalBackend:
    """The cases answered in this process by one `CaseRunner`."""

    def __init__(self, factory: Union[AgentFactory, str]) -> None:
        self.runner = CaseRunner(factory)

    async def describe(self) -> dict[str, JSONValue]:
        """The agent's profile."""
        return self.runner.describe()

    async def run(
        self,
        case_id: CaseId,
        text: str,
        timeout: float | None,
        sample: int | None = None,
        gen: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One case's answer."""
        return await self.runner.run(case_id, text, timeout, sample, gen)

    def close(self) -> None:
        """Nothing to release (the agent goes with the runner)."""


@dataclass(frozen=True)
class Rollout:
    """One unit of work: a case, or sample `sample` of it (``--samples``) with its generation settings."""

    case: Case
    sample: int | None = None
    gen: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Its key in ``results.jsonl`` (`record_key`)."""
        return case_key(self.case.id) + ("" if self.sample is None else f"#{self.sample}")


def rollouts(cases: Sequence[Case], samples: int = 1, temperature: float | None = None) -> list[Rollout]:
    """The rollouts of `cases`: each case once, or `samples` times with a seed each (see `evaluate`)."""
    if samples == 1 and temperature is None:
        return [Rollout(case) for case in cases]
    heat = 1.0 if temperature is None else temperature
    return [
        Rollout(case, k, {"seed": zlib.crc32(f"{case_key(case.id)}#{k}".encode()) & 0x7FFFFFFF, "temperature": heat})
        for case in cases
        for k in range(samples)
    ]


async def _record(
    rollout: Rollout,
    answer: Mapping[str, Any],
    scorer: Scorer,
    reward: RewardFn | None = None,
    profile: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A finished rollout's line of ``results.jsonl``: the case, the answer, the verdict, the reward."""
    case = rollout.case
    error = answer.get("error")
    passed, value = False, 0.0
    if error is None:
        try:
            passed, value = score(scorer, answer.get("output") or "", case.expected)
        except Exception as exc:  # the user's scorer: its failure is the case's error
            error = f"scorer: {type(exc).__name__}: {exc}"
    record: dict[str, Any] = {"id": case.id, "input": case.input, "expected": case.expected}
    if rollout.sample is not None:
        record.update(sample=rollout.sample, **rollout.gen)
    if case.metadata:
        record["metadata"] = case.metadata
    record.update(
        output=answer.get("output"),
        passed=passed,
        score=value,
        error=error,
        seconds=answer.get("seconds"),
        usage=answer.get("usage"),
        trajectory=answer.get("trajectory", []),
    )
    if answer.get("tokens"):
        record["tokens"] = answer["tokens"]
    if reward is not None and error is None:
        trajectory = from_eval(record, profile or {})
        try:
            record["reward"] = None if trajectory is None else await reward_of(reward, trajectory)
        except Exception as exc:  # the user's reward function (or environment agent): the case's error
            record["error"] = f"reward: {type(exc).__name__}: {exc}"
    return record


def summarise(
    records: Sequence[Mapping[str, Any]], *, ran: int = 0, wall_seconds: float = 0.0, **extra: Any
) -> dict[str, Any]:
    """The totals of `records`: ``n``, ``passed``, ``pass_rate``, ``errors``, timing and usage.

    Args:
        records: The data set's finished cases.
        ran: How many of them this run answered.
        wall_seconds: How long this run took.
        **extra: More keys for the summary (the scorer, the agent's profile...).
    """
    n = len(records)
    passed = sum(1 for record in records if record.get("passed"))
    seconds = sum(float(record.get("seconds") or 0) for record in records)
    usages = [record["usage"] for record in records if isinstance(record.get("usage"), Mapping)]
    usage = {
        key: sum(int(u.get(key) or 0) for u in usages)
        for key in ("prompt_tokens", "completion_tokens", "total_tokens", "calls")
    }
    return {
        "n": n,
        "passed": passed,
        "pass_rate": passed / n if n else 0.0,
        "errors": sum(1 for record in records if record.get("error")),
        "ran": ran,
        "wall_seconds": round(wall_seconds, 3),
        "case_seconds": round(seconds, 3),
        "mean_case_seconds": round(seconds / n, 6) if n else 0.0,
        "usage": usage if usages else None,
        **extra,
    }


async def aevaluate(
    factory: Union[AgentFactory, str],
    cases: CasesLike,
    out_dir: str | os.PathLike[str],
    *,
    concurrency: int = 8,
    scorer: Union[str, Scorer] = "contains",
    ray: bool = False,
    limit: int | None = None,
    timeout: float | None = None,
    progress: TextIO | None = None,
    ray_address: str | None = None,
    actors: int | None = None,
    samples: int = 1,
    temperature: float | None = None,
    reward: Union[str, RewardFn, None] = None,
) -> dict[str, Any]:
    """`evaluate` on a running event loop (the same arguments)."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise UserError(f"concurrency must be an int >= 1, got {concurrency!r}")
    if limit is not None and limit < 0:
        raise UserError(f"limit must be >= 0, got {limit!r}")
    if timeout is not None and not timeout > 0:
        raise UserError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise UserError(f"samples must be an int >= 1, got {samples!r}")
    if temperature is not None and not temperature >= 0:
        raise UserError(f"temperature must be a number >= 0, got {temperature!r}")
    check = load_scorer(scorer)
    rewarder = None if reward is None else load_reward(reward)
    selected = load_cases(cases)[:limit]
    keys = {case_key(case.id) for case in selected}
    units = rollouts(selected, samples, temperature)
    started = time.perf_counter()
    with OutputLock(out_dir), ResultsFile(out_dir) as results:  # one run at a time per folder
        done = results.finished()
        todo = [unit for unit in units if unit.key not in done]
        mine = [r for r in results.records if case_key(r["id"]) in keys]
        extra: dict[str, Any] = {"scorer": scorer if isinstance(scorer, str) else getattr(scorer, "__qualname__", "?")}
        if units and units[0].sample is not None:
            extra.update(samples=samples, temperature=units[0].gen["temperature"])
        backend = _backend(factory, ray, concurrency, ray_address, actors)
        try:
            extra["agent"] = await backend.describe()
            summary_path = os.path.join(os.fspath(out_dir), SUMMARY)
            write_json(summary_path, summarise(mine, **extra))  # the agent's profile, before any case runs
            shown = (
                Progress(len(units), len(mine), sum(1 for r in mine if r.get("passed")), progress) if progress else None
            )
            try:
                profile = extra["agent"]
                await _run_all(
                    backend, iter(todo), min(concurrency, len(todo)), timeout, check, results, shown, rewarder, profile
                )
            finally:
                mine = [r for r in results.records if case_key(r["id"]) in keys]
                summary = summarise(
                    mine,
                    ran=len(mine) - (len(units) - len(todo)),
                    wall_seconds=time.perf_counter() - started,
                    **extra,
                )
                write_json(summary_path, summary)
                if shown is not None:
                    shown.finish(summary)
        finally:
            backend.close()
    return summary


async def _run_all(
    backend: Backend,
    units: Iterator[Rollout],
    workers: int,
    timeout: float | None,
    scorer: Scorer,
    results: ResultsFile,
    progress: Progress | None,
    reward: RewardFn | None = None,
    profile: Mapping[str, Any] | None = None,
) -> None:
    """Answer `units` with `workers` in flight, each recorded as soon as it is done."""

    async def worker() -> None:
        for unit in units:  # one iterator shared by the workers: each rollout is taken once
            case = unit.case
            try:
                answer = await backend.run(case.id, case.input, timeout, unit.sample, unit.gen)
            except Exception as exc:  # the backend itself failed on this case (a Ray actor died...)
                answer = {"output": None, "error": f"{type(exc).__name__}: {exc}", "seconds": None}
            record = await _record(unit, answer, scorer, reward, profile)
            results.append(record)
            if progress is not None:
                progress.update(record)

    await asyncio.gather(*(worker() for _ in range(workers)))


def _backend(
    factory: Union[AgentFactory, str], ray: bool, concurrency: int, address: str | None, actors: int | None
) -> Backend:
    if not ray:
        return LocalBackend(factory)
    from .ray_runner import RayBackend

    return RayBackend(factory, concurrency=concurrency, address=address, actors=actors)


def evaluate(
    factory: Union[AgentFactory, str],
    cases: CasesLike,
    out_dir: str | os.PathLike[str],
    *,
    concurrency: int = 8,
    scorer: Union[str, Scorer] = "contains",
    ray: bool = False,
    limit: int | None = None,
    timeout: float | None = None,
    progress: TextIO | None = None,
    ray_address: str | None = None,
    actors: int | None = None,
    samples: int = 1,
    temperature: float | None = None,
    reward: Union[str, RewardFn, None] = None,
) -> dict[str, Any]:
    """Run the agent `factory` makes over `cases`, scoring each answer; the summary (also in ``summary.json``).

    Args:
        factory: A zero-argument callable returning the agent, or ``'MODULE:FACTORY'``.
        cases: The data set: a JSONL file's path, or cases / dicts (`plait.eval.cases`).
        out_dir: Where ``results.jsonl`` and ``summary.json`` go; cases already in its
            ``results.jsonl`` do not run again. The run holds the folder's lock (``eval.lock``)
            while it runs.
        concurrency: Cases in flight at once.
        scorer: ``'contains'``, ``'exact'``, ``'regex'``, ``'MODULE:FN'`` or a function
            (`plait.eval.scorers`).
        ray: Answer the cases in a pool of Ray actors (the ``ray`` extra).
        limit: Only the data set's first `limit` cases.
        timeout: Seconds a case may take; a slower one is an error.
        progress: Where to show progress and the summary table (None: nowhere).
        ray_address: The Ray cluster to join (None: ``$RAY_ADDRESS``, else a local runtime).
        actors: Size of the Ray actor pool (None: one per CPU of the cluster, at most `concurrency`).
        samples: Rollouts per case. With more than one (or with a `temperature`), sample K of a
            case runs in its own session with the generation settings ``seed`` (CRC-32 of the
            case's key and K: the same on a rerun, different between samples) and
            ``temperature`` (default 1.0: at 0 the samples would be alike), passed with the call
            to the agent, which passes them to its model; its record carries ``sample``,
            ``seed`` and ``temperature``, and its key is the case's with ``#K``.
        temperature: The samples' sampling temperature.
        reward: ``fn(trajectory) -> float`` (or ``'MODULE:FN'``, or an `EnvironmentReward`): the
            record's ``reward``, instead of the scorer's score (`plait.trajectories.rewards`).

    Raises:
        UserError: Settings that cannot work, or another run using `out_dir` (checked before any case runs).
    """
    return asyncio.run(
        aevaluate(
            factory,
            cases,
            out_dir,
            concurrency=concurrency,
            scorer=scorer,
            ray=ray,
            limit=limit,
            timeout=timeout,
            progress=progress,
            ray_address=ray_address,
            actors=actors,
            samples=samples,
            temperature=temperature,
            reward=reward,
        )
    )
