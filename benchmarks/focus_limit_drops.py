"""Every FOCUS_LIMIT drop in an evaluation's traces, with the focus count the agent had then (the state rebuilt from
the step records, as resume and fork rebuild it): how many focus actions were taken and how many of them the game
took without a reward. A drop after unrewarded focuses only beyond the task's own gold allowance is one that
srm.focus_limit_counts = "rewarded" would not make; the rest would be made the same.

    .venv/bin/python benchmarks/focus_limit_drops.py assets/evaluations/cpu-30x2x30
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.episode.replay import states_along  # noqa: E402
from agent_core.gold import focus_unrewarded_limit  # noqa: E402
from agent_core.trace import read_episode  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("evaluation", help="an evaluation directory (its traces/<preset>/*.jsonl)")
    args = ap.parse_args()
    would_change = total = 0
    for path in sorted(Path(args.evaluation).glob("traces/*/*.jsonl")):
        ep = read_episode(path)
        allowance = focus_unrewarded_limit(ep.header.task)
        drops = [(rec.step, st.focus_done, st.focus_unrewarded) for rec, st in states_along(ep)
                 for d in rec.gate1 if d.reason == "FOCUS_LIMIT"]
        if drops:
            changes = any(u > allowance for _, _, u in drops)
            would_change += changes
            total += 1
            print(f"{'differs' if changes else 'same   '} {path.parent.name}/{path.name}: "
                  + ", ".join(f"step {s} ({n} taken, {u} unrewarded)" for s, n, u in drops))
    print(f"\n{total} episode(s) with a FOCUS_LIMIT drop; {would_change} would play differently under "
          f"srm.focus_limit_counts = rewarded")


if __name__ == "__main__":
    main()
