"""How often Sage's plan copies a stored plan it was shown as a memory hint, in an evaluation's traces.

A plan call "copies" when its prompt holds a `[plan]` hint (T4) and its reply starts with the same 60 characters as
that hint's answers (whitespace collapsed). Also counts the distinct plan openings (first 80 characters) per
episode: a plan that never moves on has one. Reads traces only.

    .venv/bin/python benchmarks/plan_copies.py assets/evaluations/cpu-30x2x30 --presets amm full
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.trace import read_episode  # noqa: E402

PLAN_HINT = re.compile(r"\[plan\] PLAN \([^)]*\) \| (.*?)(?: \| BUFFER|\n)")


def words(s: str) -> str:
    return " ".join(s.split())


def count(paths) -> dict[str, int]:
    out = {"plan_calls": 0, "with_plan_hint": 0, "copied": 0, "distinct_openings": 0}
    for path in paths:
        openings = set()
        for rec in read_episode(path).steps:
            if rec.replayed:  # a fork's copied steps belong to its parent
                continue
            for call in rec.llm_calls:
                if call.purpose != "plan" or not call.output:
                    continue
                out["plan_calls"] += 1
                openings.add(words(call.output)[:80])
                m = PLAN_HINT.search(call.prompt)
                if m:
                    out["with_plan_hint"] += 1
                    out["copied"] += words(m.group(1))[:60] == words(call.output)[:60]
        out["distinct_openings"] += len(openings)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("evaluation", help="an evaluation directory (its traces/<preset>/*.jsonl)")
    ap.add_argument("--presets", nargs="*", default=["amm", "full"])
    args = ap.parse_args()
    for preset in args.presets:
        c = count(sorted(Path(args.evaluation).glob(f"traces/{preset}/*.jsonl")))
        print(f"{preset}: {c['plan_calls']} plan calls, {c['with_plan_hint']} with a stored plan as a hint, "
              f"{c['copied']} of them copied it; {c['distinct_openings']} distinct plan openings (per episode, summed)")


if __name__ == "__main__":
    main()
