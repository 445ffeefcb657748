"""``plait eval`` and ``plait export``: the command-line side of `plait.eval`.

```
plait eval DATA.jsonl --agent MODULE:FACTORY --out DIR [--concurrency N] [--scorer contains|exact|regex|MODULE:FN]
           [--ray] [--limit N] [--timeout S] [--model NAME]
           [--samples K] [--temperature T] [--reward MODULE:FN]
plait export DIR|TRAJECTORIES.jsonl -o FILE [--only-passed] [--min-reward X]
             [--format openai|sharegpt|xtuner|verl|trajectories]
```

Settings that cannot work (an unreadable data set, a broken line in it, a factory that does
not import, an unknown scorer, an ``--out`` folder another ``plait eval`` is using) are one
line on stderr and exit status 2, before any case runs. Failing cases do not change the exit
status: they are results.

``--model NAME`` sets ``$PLAIT_MODEL`` for the factory (and the Ray workers it starts), which
reads it as ``plait`` does: ``plait.cli.build_llm(os.environ.get("PLAIT_MODEL"), ...)`` (see
examples/eval/capitals_agent.py). Without a server (``$PLAIT_API_BASE``) it names an embedded
model, checked before any case runs: a catalogue name (``plait models``) or a ``.gguf`` file.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    """Add the ``eval`` and ``export`` subcommands to the ``plait`` parser's subparsers `sub`."""
    evaluate = sub.add_parser("eval", help="run an agent over a JSONL data set, score it, keep the results")
    evaluate.add_argument("data", metavar="DATA.jsonl", help='cases, one {"id", "input", "expected"} per line')
    evaluate.add_argument("--agent", required=True, metavar="MODULE:FACTORY", help="zero-argument agent factory")
    evaluate.add_argument("--out", required=True, metavar="DIR", help="results.jsonl and summary.json go here")
    evaluate.add_argument("--concurrency", type=int, default=8, help="cases in flight at once (default: 8)")
    evaluate.add_argument(
        "--scorer", default="contains", help="contains (default), exact, regex, or MODULE:FN returning bool or score"
    )
    evaluate.add_argument("--ray", action="store_true", help="answer the cases in a pool of Ray actors")
    evaluate.add_argument("--ray-address", help="Ray cluster to join (default: $RAY_ADDRESS, else a local runtime)")
    evaluate.add_argument("--actors", type=int, help="Ray actors in the pool (default: one per CPU)")
    evaluate.add_argument("--limit", type=int, help="only the first N cases of the data set")
    evaluate.add_argument("--timeout", type=float, help="seconds a case may take (default: no limit)")
    evaluate.add_argument(
        "--model",
        help="sets $PLAIT_MODEL for the factory: a server's model name, or a catalogue name (plait models) or "
        ".gguf file for the embedded model",
    )
    evaluate.add_argument(
        "--samples",
        type=int,
        default=1,
        metavar="K",
        help="rollouts per case, each with its own seed (default: 1); each is a rewarded trajectory",
    )
    evaluate.add_argument(
        "--temperature",
        type=float,
        metavar="T",
        help="sampling temperature of the rollouts (default with --samples: 1.0)",
    )
    evaluate.add_argument(
        "--reward", metavar="MODULE:FN", help="reward(trajectory) -> float for each case, instead of the scorer's score"
    )
    export = sub.add_parser("export", help="trajectories (an evaluation's, or a trajectories file) as training JSONL")
    export.add_argument(
        "dir", metavar="DIR", help="the --out folder of plait eval, or a trajectories JSONL file (plait record-proxy)"
    )
    export.add_argument("-o", "--output", required=True, metavar="FILE", help="the JSONL file to write")
    export.add_argument("--only-passed", action="store_true", help="only the cases that passed")
    export.add_argument("--min-reward", type=float, metavar="X", help="only trajectories with a reward of X or more")
    export.add_argument(
        "--format",
        choices=["openai", "sharegpt", "xtuner", "verl", "trajectories"],
        default="openai",
        help="OpenAI fine-tuning chat (default), ShareGPT, XTuner's OpenAI format, verl agent-loop rollouts, "
        "plait trajectories",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``plait eval`` or ``plait export`` as `args` say; the exit status.

    Raises:
        UserError: Settings that cannot work (``plait`` prints it and exits with status 2).
    """
    if args.command == "export":
        from ..trajectories.export import export_trajectories, load_trajectories

        trajectories = load_trajectories(args.dir, only_passed=args.only_passed)
        done = export_trajectories(trajectories, args.output, args.format, min_reward=args.min_reward)
        sys.stdout.write(f"{done.written} cases written to {args.output}\n")
        if done.below:
            sys.stdout.write(f"{done.below} left out: no reward, or below {args.min_reward:g}\n")
        if done.unfit:
            sys.stdout.write(f"{done.unfit} left out: not token-exact (the {args.format} format needs token ids)\n")
        return 0
    if args.model:
        if not (os.environ.get("PLAIT_API_BASE") or os.environ.get("OPENAI_BASE_URL")):
            from ..cli import embedded_model

            embedded_model(args.model)  # an unknown name fails here (exit 2), not in every case
        os.environ["PLAIT_MODEL"] = args.model
    from .runner import evaluate

    evaluate(
        args.agent,
        args.data,
        args.out,
        concurrency=args.concurrency,
        scorer=args.scorer,
        ray=args.ray,
        limit=args.limit,
        timeout=args.timeout,
        progress=sys.stdout,
        ray_address=args.ray_address,
        actors=args.actors,
        samples=args.samples,
        temperature=args.temperature,
        reward=args.reward,
    )
    return 0
