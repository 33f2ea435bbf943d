"""Paired figures of an evaluation after some of its episodes were played again with changed code.

When a change alters only the steps where one recorded decision fired (say `nothing_admissible`), every episode
whose trace lacks it plays the same under the new code: the episodes that had it are played again (the same
presets, tasks and variations, into another evaluation directory), and this script puts their Final in place of
the old one and prints each preset's paired difference against the reference before and after. Episodes of the
reference played again in the same run check that the machine plays the old episodes the same (same Final).

    .venv/bin/python benchmarks/replayed_pairs.py benchmarks/results/llm-free-90/results.json \\
        /tmp/a-replay/results.json --reference swift

Whole pairs (`--whole-pairs DIR`): when every preset of a task-variation was played again on one kind of machine
(the traces' CPU model and vector instructions), that pair is replaced whole, even where the reference plays
differently there: each pair then still compares agents of one machine and one revision, and the machines differ
only between pairs. The script writes DIR, a new evaluation
directory (the old evaluation's traces for the pairs not played again, the new ones for those that were) and its
report.md / results.json, whose Provenance names both revisions and machines.

    .venv/bin/python benchmarks/replayed_pairs.py assets/evaluations/cpu-30x2x30/results.json \\
        evals/cpu-30x2x30-head/results.json --whole-pairs /tmp/b-at-head
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
    ap.add_argument("--whole-pairs", metavar="DIR", help="replace the pairs played again whole, into a new evaluation DIR")
    args = ap.parse_args()
    if args.whole_pairs:
        return whole_pairs(Path(args.results), Path(args.replayed), Path(args.whole_pairs), args.reference)
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


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def sort_pairs(presets: set[str], new_res: dict) -> tuple[dict, set, list, list]:
    """The episodes played again by (task, variation) -> preset, and which pairs are whole (every preset of the
    evaluation played again, all on one kind of machine: the traces' CPU model and vector instructions), mixed
    (every preset, but on more than one kind: across machines the same code can play an episode differently, so
    such a pair is no pair) or partial."""
    new_eps: dict[tuple[str, int], dict[str, dict]] = {}
    for e in new_res["episodes"]:
        new_eps.setdefault((e["task"], e["variation"]), {})[e["preset"]] = e

    def one_machine(by: dict) -> bool:
        kinds = {(m.get("cpu"), m.get("isa")) if (m := e.get("machine")) else None for e in by.values()}
        return len(kinds) == 1 and None not in kinds

    complete = {k for k, by in new_eps.items() if presets <= set(by)}
    whole = {k for k in complete if one_machine(new_eps[k])}
    return new_eps, whole, sorted(complete - whole), sorted(set(new_eps) - complete)


def whole_pairs(results: Path, replayed: Path, out: Path, reference: str) -> None:
    import shutil

    from agent_core.evaluate.report import write_reports

    old_res, new_res = json.loads(results.read_text()), json.loads(replayed.read_text())
    presets = set(old_res["preset_order"])
    new_eps, whole, mixed, partial = sort_pairs(presets, new_res)
    if out.exists():
        raise SystemExit(f"{out} exists: choose a new directory")
    (out / "traces").mkdir(parents=True)
    record = json.loads((results.parent / "evaluation.json").read_text())
    (out / "evaluation.json").write_text(json.dumps(record, indent=1))
    for e in old_res["episodes"]:
        k = (e["task"], e["variation"])
        src = Path(new_eps[k][e["preset"]]["trace"]) if k in whole else Path(e["trace"])
        if not src.exists():  # the path as written on another machine or checkout: the evaluation's own folder
            src = (replayed if k in whole else results).parent / "traces" / e["preset"] / src.name
        dest = out / "traces" / e["preset"] / src.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    before = {p: paired(finals(old_res), p, reference) for p in presets - {reference}}
    res = write_reports(out)
    after = {p: paired(finals(res), p, reference) for p in presets - {reference}}
    print(f"pairs replaced whole: {len(whole)} ({', '.join(f'{t} v{v}' for t, v in sorted(whole))})")
    # each replaced pair's Finals as recorded -> as played again (raw, a failure at -100), in preset order
    order = [p for p in old_res["preset_order"] if p in presets]
    was = {(e["preset"], e["task"], e["variation"]): e.get("raw_final", e["final"]) for e in old_res["episodes"]}
    print(f"\n| pair | {' | '.join(order)} |\n|---|{'---|' * len(order)}")
    for t, v in sorted(whole):
        again = {p: new_eps[(t, v)][p].get("raw_final", new_eps[(t, v)][p]["final"]) for p in order}
        print(f"| {t} v{v} | " + " | ".join(f"{_num(was.get((p, t, v)))} -> {_num(again[p])}" for p in order) + " |")
    if partial:
        print(f"played again but not every preset (kept old): {', '.join(f'{t} v{v}' for t, v in partial)}")
    if mixed:
        print("played again on more than one kind of machine or on one not recorded (kept old): "
              + ", ".join(f"{t} v{v}" for t, v in mixed))
    print(f"\n{'preset':14s} {'pairs':>5s}  before                    after")
    for p in sorted(presets - {reference}):
        print(f"{p:14s} {before[p][1]:5d}  {before[p][0]:24s}  {after[p][0]}")
    print(f"\nwrote {out / 'report.md'}")


if __name__ == "__main__":
    main()
