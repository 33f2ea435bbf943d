"""Two evaluations of the same episodes, episode by episode: how many played the same actions and ended with the
same Final, which machine played those that did not, and each record's LLM calls (count, failures, slowest).

Used when one record replaces another (the shipped evaluation played again after a fix): the paired report of
each says how the presets compare; this says how much of the play itself changed between the two.

    .venv/bin/python benchmarks/record_diff.py OLD_RECORD assets/evaluations/cpu-30x2x30 --list
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.evaluate.metrics import episode_metrics  # noqa: E402
from agent_core.evaluate.paired import first_divergence  # noqa: E402
from agent_core.provenance import describe_machine  # noqa: E402
from agent_core.trace import Episode, read_episode  # noqa: E402


def llm_calls(ep: Episode) -> tuple[int, int, float]:
    """(calls, failed calls, slowest call in seconds) over the episode's steps: the counts as the evaluation's
    report makes them (episode_metrics), the slowest call, which it does not give."""
    m = episode_metrics(ep)
    slowest = max((c.latency_s for s in ep.steps for c in s.llm_calls), default=0.0)
    return sum(m["llm_calls"].values()), m["llm_errors"], slowest


def compare(old: Path, new: Path, preset: str, listing: bool = False) -> dict:
    """One preset's episodes found in both records: counts of the same actions and Final, the machines that played
    the episodes whose actions differ, and the new record's LLM calls."""
    out = {"episodes": 0, "same_actions": 0, "same_final": 0, "machines": Counter(), "calls": 0, "failed": 0,
           "slowest": 0.0}
    for path in sorted((new / "traces" / preset).glob("*.jsonl")):
        old_path = old / "traces" / preset / path.name
        if not old_path.exists():
            continue
        a, b = read_episode(old_path), read_episode(path)
        out["episodes"] += 1
        c, f, s = llm_calls(b)
        out["calls"], out["failed"], out["slowest"] = out["calls"] + c, out["failed"] + f, max(out["slowest"], s)
        step = first_divergence(a.steps, b.steps)
        finals = tuple(episode_metrics(e)["raw_final"] for e in (a, b))
        out["same_actions"] += step is None
        out["same_final"] += finals[0] == finals[1]
        if step is not None:
            out["machines"][describe_machine(b.header.machine or {})] += 1
            if listing:
                print(f"  {preset} {path.name}: parts at step {step}, Final {finals[0]} -> {finals[1]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path, help="an evaluation folder (with traces/<preset>/)")
    ap.add_argument("new", type=Path, help="another evaluation folder of the same episodes")
    ap.add_argument("--presets", nargs="+", default=["baseline", "amm", "srm", "full", "swift"])
    ap.add_argument("--list", action="store_true", help="print every episode that played other actions")
    args = ap.parse_args()
    for preset in args.presets:
        d = compare(args.old, args.new, preset, args.list)
        print(f"{preset}: {d['episodes']} episodes in both; the same actions in {d['same_actions']}, the same Final in "
              f"{d['same_final']}" + (f"; the others played on {dict(d['machines'])}" if d["machines"] else "")
              + (f"; {d['calls']} LLM calls in the new record, {d['failed']} failed, the slowest {d['slowest']:.1f} s"
                 if d["calls"] else ""))


if __name__ == "__main__":
    main()
