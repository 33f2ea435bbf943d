"""Paired figures of an evaluation after some of its episodes were played again with changed code.

When a change alters only the steps where one recorded decision fired (say `nothing_admissible`), every episode
whose trace lacks it plays the same under the new code: the episodes that had it are played again (the same
presets, tasks and variations, into another evaluation directory), and this script puts their Final in place of
the old one and prints each preset's paired difference against the reference before and after. Episodes of the
reference played again in the same run check that the machine plays the old episodes the same (same Final).

    .venv/bin/python benchmarks/replayed_pairs.py benchmarks/results/llm-free-90/results.json \\
        /tmp/a-replay/results.json --reference swift
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.evaluate.paired import t_interval  # noqa: E402


def finals(res: dict) -> dict[tuple[str, str, int], float]:
    return {(e["preset"], e["task"], e["variation"]): e["final"] for e in res["episodes"] if e.get("final") is not None}


def paired(by: dict[tuple[str, str, int], float], preset: str, reference: str) -> tuple[str, int]:
    keys = sorted((t, v) for p, t, v in by if p == preset and (reference, t, v) in by)
    iv = t_interval([by[(preset, t, v)] - by[(reference, t, v)] for t, v in keys])
    return f"{iv.mean:+.2f} [{iv.low:+.2f}, {iv.high:+.2f}]", iv.n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="the evaluation's results.json")
    ap.add_argument("replayed", help="results.json of the episodes played again")
    ap.add_argument("--reference", default="baseline")
    args = ap.parse_args()
    old = finals(json.loads(Path(args.results).read_text()))
    again = finals(json.loads(Path(args.replayed).read_text()))
    unknown = sorted(k for k in again if k not in old)
    if unknown:
        raise SystemExit(f"played again but not in the evaluation: {unknown[:5]}")
    print(f"{'preset':14s} {'task':45s} {'v':>4s} {'before':>7s} {'after':>7s}")
    for k in sorted(again):
        print(f"{k[0]:14s} {k[1]:45s} {k[2]:4d} {old[k]:7g} {again[k]:7g}" + ("" if old[k] == again[k] else "  *"))
    same_ref = [k for k in again if k[0] == args.reference]
    if same_ref:
        n_same = sum(old[k] == again[k] for k in same_ref)
        print(f"\nreference ({args.reference}) played again: the same Final in {n_same} of {len(same_ref)}")
        if n_same < len(same_ref):
            # this machine (or this revision) plays unchanged episodes differently: putting its Finals into the old
            # evaluation would mix two runs' play, so compare the episodes played again among themselves instead
            raise SystemExit("the reference does not play the same here: no substituted figures (compare the "
                             "episodes played again with each other, on this machine)")
    new = {**old, **again}
    print(f"\n{'preset':14s} {'pairs':>5s}  before                    after")
    for preset in sorted({k[0] for k in again} - {args.reference}):
        (b, n), (a, _n) = paired(old, preset, args.reference), paired(new, preset, args.reference)
        print(f"{preset:14s} {n:5d}  {b:24s}  {a}")


if __name__ == "__main__":
    main()
