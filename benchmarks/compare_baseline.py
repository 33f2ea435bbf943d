"""A Baseline run (`baseline_embedded.py`'s jsonl) against Swift alone on the same episodes, as Markdown.

    .venv/bin/python benchmarks/compare_baseline.py benchmarks/results/baseline_embedded_v3.jsonl \
        [--swift benchmarks/results/swift_30x50.json] [--label "Baseline (...)"] ...

Several Baseline files may be given (each becomes a row). Prints the table (Final, successes, episodes at -100,
steps by Sage, Sage call p50 / p95) over the episodes every file has, then, for the last file, the episodes
where it and Swift alone differ, with the focus that ended each episode at -100 and who chose it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from benchmarks.episode_pool import pct  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def load_jsonl(path: Path) -> dict[tuple[str, int], dict]:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return {(r["task"], r["variation"]): r for r in rows if "error" not in r}


def row(name: str, eps: list[dict], sage: bool) -> str:
    final = statistics.mean(max(0.0, e["final"]) for e in eps)
    succ = sum(bool(e["success"]) for e in eps)
    neg = sum(e.get("raw_final", e["final"]) <= -100 for e in eps)
    if not sage:
        return f"| {name} | {final:.2f} | {succ} | {neg} | 0 | - |"
    secs = [s for e in eps for s in e["sage_seconds"]]
    steps = sum(e["sage_steps"] for e in eps), sum(e["steps"] for e in eps)
    return (f"| {name} | {final:.2f} | {succ} | {neg} | {steps[0]} of {steps[1]} | "
            f"{len(secs)} ({pct(secs, 0.5):.1f} s / {pct(secs, 0.95):.1f} s) |")


def last_focus(e: dict) -> str:
    hits = [(a, s) for a, s in zip(e["actions"], e["systems"]) if a.startswith("focus on")]
    return f"'{hits[-1][0]}' by {hits[-1][1]}" if hits else "no focus"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("baseline", nargs="+", type=Path)
    ap.add_argument("--swift", type=Path, default=ROOT / "benchmarks" / "results" / "swift_30x50.json")
    ap.add_argument("--label", action="append", default=[], help="row names, one per Baseline file")
    args = ap.parse_args()

    swift = {(e["task"], e["variation"]): e for e in json.loads(args.swift.read_text())["episodes"]}
    runs = [load_jsonl(p) for p in args.baseline]
    keys = sorted(set(swift).intersection(*runs))
    print(f"{len(keys)} episodes in common\n")
    print("| agent, the same episodes | Final | successes | at -100 | steps by Sage | Sage calls (p50 / p95) |")
    print("|---|---|---|---|---|---|")
    print(row(f"Swift alone (`{args.swift.name}`)", [swift[k] for k in keys], sage=False))
    for i, (path, run) in enumerate(zip(args.baseline, runs)):
        name = args.label[i] if i < len(args.label) else f"Baseline (`{path.name}`)"
        print(row(name, [run[k] for k in keys], sage=True))
    last = runs[-1]
    print("\nWhere the last Baseline and Swift alone differ (Baseline vs Swift alone):")
    for k in keys:
        b, s = last[k], swift[k]
        if b["final"] != s["final"]:
            why = f"; ended at -100 on {last_focus(b)}" if b.get("raw_final", b["final"]) <= -100 else ""
            print(f"- {k[0]}: {b['final']:g} vs {s['final']:g} ({b['sage_calls']} Sage calls{why})")


if __name__ == "__main__":
    main()
