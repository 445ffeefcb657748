"""``plait export``: trajectories as training data, one format per function, each with its JSON Schema.

Every format reads `Trajectory` records (from an evaluation folder through
`plait.trajectories.from_eval`, or from a trajectories JSONL file such as the recording
proxy writes) and gives one JSON line per trajectory; `schema` gives the JSON Schema each
format's lines validate against (``plait/trajectories/schemas/``, written from the format's
documentation, named in each schema's ``$comment``).

* ``openai`` (default): OpenAI's fine-tuning chat format, ``{"messages": [...], "tools": [...]}``:
  ``system`` / ``user`` / ``assistant`` messages, the assistant's tool calls as ``tool_calls``
  (``type: function``, ``arguments`` a JSON string) answered by ``tool`` messages with their
  ``tool_call_id``; ``tools`` are the JSON Schemas of the agent's tools. The format has no
  reasoning field (its schema allows no other message key), so reasoning is left out.
* ``sharegpt`` (LLaMA-Factory style): ``{"conversations": [{"from", "value"}], "system",
  "tools"}`` with ``human`` / ``gpt`` / ``function_call`` / ``observation`` turns and ``tools``
  as a JSON string.
* ``xtuner``: XTuner's OpenAI-format data as its ``openai_map_fn`` reads it:
  ``{"messages": [...]}`` with only ``system`` / ``user`` / ``assistant`` roles (the map
  function refuses any other). A tool call is text in its assistant turn,
  in InternLM2's plugin syntax (``<|action_start|><|plugin|>`` + ``{"name", "parameters"}`` +
  ``<|action_end|>``); a tool's result is the next ``user`` turn; the tools' descriptions
  follow the system prompt; each assistant turn has ``"loss": true``.
* ``verl``: one rollout of verl's agent loop (its ``AgentLoopOutput``): ``prompt_ids``,
  ``response_ids`` with ``response_mask`` (1: a sampled token, 0: a tool or environment token
  between turns), ``response_logprobs``, ``reward_score`` and ``num_turns``. verl over
  OpenRLHF because verl's agent loop is a documented per-trajectory record for multi-turn
  tool use — exactly a token-exact trajectory with its reward — where OpenRLHF's rollouts
  exist only as in-memory tensors of its own generation. Only token-exact trajectories can be
  written (a trainer must not re-tokenise): each model turn's prompt must extend the previous
  turn's prompt and sampled tokens; a trajectory that is text only, or whose turns do not
  chain, is left out and counted.
* ``trajectories``: the `Trajectory` records themselves (JSON Lines as `TrajectoryFile` writes
  them), e.g. an evaluation's rollouts for a trainer of one's own; its schema is the model's.

``min_reward`` leaves out trajectories with no reward or a smaller one; ``only_passed`` (an
evaluation's cases that passed) stays as it was. Each evaluation case (or sample of a case)
is written once: from its last line in ``results.jsonl`` (`plait.eval.results`); cases that
ended with an error are left out (no answer).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal, get_args

from ..exceptions import UserError
from ..untrusted import decode_arguments
from .from_eval import eval_profile, from_eval
from .record import Trajectory, read_trajectories

__all__ = [
    "ExportFormat",
    "Exported",
    "export",
    "export_trajectories",
    "load_trajectories",
    "schema",
    "to_openai",
    "to_sharegpt",
    "to_trajectory",
    "to_verl",
    "to_xtuner",
]

ExportFormat = Literal["openai", "sharegpt", "xtuner", "verl", "trajectories"]


def to_openai(trajectory: Trajectory) -> dict[str, Any]:
    """One trajectory in OpenAI's fine-tuning chat format (``messages``, and ``tools`` when it has any)."""
    messages = [{k: v for k, v in message.items() if k != "reasoning_content"} for message in trajectory.messages]
    line: dict[str, Any] = {"messages": messages}
    if trajectory.tools:
        line["tools"] = trajectory.tools
    return line


_SHAREGPT_ROLES = {"user": "human", "assistant": "gpt", "tool": "observation"}


def _calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An assistant message's tool calls as ``{"name", "arguments"}`` with the arguments decoded."""
    return [
        {"name": c["function"]["name"], "arguments": decode_arguments(c["function"]["arguments"])}
        for c in message.get("tool_calls") or []
    ]


def to_sharegpt(trajectory: Trajectory) -> dict[str, Any]:
    """One trajectory in the ShareGPT format (see the module docstring)."""
    turns: list[dict[str, str]] = []
    system = ""
    for message in trajectory.messages:
        role = message["role"]
        if role == "system":
            system = str(message.get("content") or "")
        elif role == "assistant" and message.get("tool_calls"):
            calls = _calls(message)
            value = calls[0] if len(calls) == 1 else calls
            turns.append({"from": "function_call", "value": json.dumps(value, ensure_ascii=False)})
        elif role == "tool" and turns and turns[-1]["from"] == "observation":  # results of one turn's calls, together
            turns[-1]["value"] += "\n" + str(message.get("content") or "")
        else:
            turns.append({"from": _SHAREGPT_ROLES.get(role, "human"), "value": str(message.get("content") or "")})
    functions = [tool["function"] for tool in trajectory.tools]
    return {"conversations": turns, "system": system, "tools": json.dumps(functions, ensure_ascii=False)}


def to_xtuner(trajectory: Trajectory) -> dict[str, Any]:
    """One trajectory as XTuner's OpenAI-format data (see the module docstring)."""
    system = "\n".join(str(m.get("content") or "") for m in trajectory.messages if m["role"] == "system")
    if trajectory.tools:
        functions = json.dumps([tool["function"] for tool in trajectory.tools], ensure_ascii=False)
        system = f"{system}\n\nYou can call these tools:\n{functions}".lstrip()
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in trajectory.messages:
        role, content = message["role"], str(message.get("content") or "")
        if role == "assistant":
            actions = "".join(
                "<|action_start|><|plugin|>\n"
                + json.dumps({"name": call["name"], "parameters": call["arguments"]}, ensure_ascii=False)
                + "<|action_end|>"
                for call in _calls(message)
            )
            messages.append({"role": "assistant", "content": content + actions, "loss": True})
        elif role != "system":  # user turns, and tool results (the next input)
            messages.append({"role": "user", "content": content})
    return {"messages": messages}


def to_verl(trajectory: Trajectory) -> dict[str, Any] | None:
    """One token-exact trajectory as a verl agent-loop rollout (None: text only, or its turns do not chain)."""
    if not trajectory.token_exact or any(t.prompt_ids is None for t in trajectory.tokens):
        return None
    turns = sorted(trajectory.tokens, key=lambda t: t.message)
    prompt = list(turns[0].prompt_ids or [])
    context = list(prompt)  # everything the model has seen or said so far
    response: list[int] = []
    mask: list[int] = []
    logprobs: list[float] | None = [] if all(t.logprobs is not None for t in turns) else None
    for turn in turns:
        ids = turn.prompt_ids or []
        if ids[: len(context)] != context:  # re-rendered: the turns do not extend one another
            return None
        between = ids[len(context) :]
        response += between + turn.completion_ids
        mask += [0] * len(between) + [1] * len(turn.completion_ids)
        if logprobs is not None:
            logprobs += [0.0] * len(between) + list(turn.logprobs or [])
        context = ids + turn.completion_ids
    line: dict[str, Any] = {"prompt_ids": prompt, "response_ids": response, "response_mask": mask}
    if logprobs is not None:
        line["response_logprobs"] = logprobs
    line["reward_score"] = trajectory.reward
    line["num_turns"] = sum(1 for m in trajectory.messages if m["role"] in ("user", "assistant", "tool"))
    line["extra_fields"] = {"id": trajectory.id, "messages": trajectory.messages, "metadata": trajectory.metadata}
    return line


def to_trajectory(trajectory: Trajectory) -> dict[str, Any]:
    """The trajectory itself, as plait writes it (`Trajectory.to_json`), for a trainer of one's own."""
    line: dict[str, Any] = json.loads(trajectory.to_json())
    return line


_FORMATS: dict[str, Callable[[Trajectory], dict[str, Any] | None]] = {
    "openai": to_openai,
    "sharegpt": to_sharegpt,
    "xtuner": to_xtuner,
    "verl": to_verl,
    "trajectories": to_trajectory,
}


@cache
def schema(fmt: str) -> dict[str, Any]:
    """The JSON Schema a line of format `fmt` validates against.

    Raises:
        UserError: An unknown format.
    """
    if fmt not in _FORMATS:
        raise UserError(f"unknown export format {fmt!r}: use {', '.join(get_args(ExportFormat))}")
    if fmt == "trajectories":  # plait's own record: its schema is the model's
        generated = Trajectory.model_json_schema()
        generated["properties"]["token_exact"] = {"type": "boolean"}
        return generated
    text = resources.files(__package__).joinpath("schemas").joinpath(f"{fmt}.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def load_trajectories(source: str | os.PathLike[str], only_passed: bool = False) -> Iterator[Trajectory]:
    """The trajectories of an evaluation folder (``plait eval --out``) or of a trajectories JSONL file.

    `source` is checked at once; its lines are read as the iterator is.

    Raises:
        UserError: `source` is neither, or holds a line that is not a result / trajectory.
    """
    path = os.fspath(source)
    if os.path.isdir(path):
        return _from_eval_folder(path, only_passed)
    if not os.path.isfile(path):
        raise UserError(f"no evaluation in {path}: not a folder of plait eval nor a trajectories file")
    return (t for t in read_trajectories(path) if not only_passed or t.metadata.get("passed"))


def _from_eval_folder(path: str, only_passed: bool) -> Iterator[Trajectory]:
    from ..eval.results import RESULTS, read_results

    if not os.path.exists(os.path.join(path, RESULTS)):
        raise UserError(f"no evaluation in {path}: it has no {RESULTS}")
    profile = eval_profile(path)
    records, _, _ = read_results(os.path.join(path, RESULTS))  # read only: a run may still be appending
    trajectories = (from_eval(r, profile) for r in records if not only_passed or r.get("passed"))
    return (t for t in trajectories if t is not None)


@dataclass(frozen=True)
class Exported:
    """What an export wrote.

    Attributes:
        written: Lines written.
        below: Trajectories left out for ``min_reward``.
        unfit: Trajectories the format cannot hold (text-only ones for ``verl``).
    """

    written: int
    below: int = 0
    unfit: int = 0


def export_trajectories(
    trajectories: Iterator[Trajectory] | list[Trajectory],
    path: str | os.PathLike[str],
    fmt: ExportFormat = "openai",
    min_reward: float | None = None,
) -> Exported:
    """Write `trajectories` in format `fmt` to `path`, one JSON line each.

    Raises:
        UserError: An unknown format.
    """
    convert = _FORMATS.get(fmt)
    if convert is None:
        raise UserError(f"unknown export format {fmt!r}: use {', '.join(get_args(ExportFormat))}")
    written = below = unfit = 0
    with open(path, "w", encoding="utf-8") as fh:
        for trajectory in trajectories:
            if min_reward is not None and (trajectory.reward is None or trajectory.reward < min_reward):
                below += 1
                continue
            line = convert(trajectory)
            if line is None:
                unfit += 1
                continue
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
            written += 1
    return Exported(written, below, unfit)


def export(
    source: str | os.PathLike[str],
    path: str | os.PathLike[str],
    fmt: ExportFormat = "openai",
    only_passed: bool = False,
    min_reward: float | None = None,
) -> int:
    """Write the trajectories of `source` (an evaluation folder or a trajectories JSONL file) to `path`; how many.

    Raises:
        UserError: `source` holds no evaluation or trajectories, or the format is unknown.
    """
    if fmt not in _FORMATS:
        raise UserError(f"unknown export format {fmt!r}: use {', '.join(get_args(ExportFormat))}")
    return export_trajectories(load_trajectories(source, only_passed), path, fmt, min_reward).written
