"""Every `focus on` an evaluation's episodes played on an object they had already focused on (the state rebuilt
from the step records, as resume and fork rebuild it), with what the game then did: the case Gate-1's FOCUS_REPEAT
(srm.gate1_focus_repeat) drops. An episode where such a repeat was played under a preset that runs Gate-1 plays
differently under the new rule from that step on; under Baseline the count says how often the rule would have
had something to drop.

    .venv/bin/python benchmarks/focus_repeats.py assets/evaluations/cpu-30x2x30
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.actions import argument_of, is_focus  # noqa: E402
from agent_core.episode.reducer import focus_counts  # noqa: E402
from agent_core.episode.replay import states_along  # noqa: E402
from agent_core.srm.gate1 import refocuses  # noqa: E402
from agent_core.trace import read_episode  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("evaluation", help="an evaluation directory (its traces/<preset>/*.jsonl)")
    args = ap.parse_args()
    episodes: Counter[str] = Counter()
    repeats: Counter[str] = Counter()
    for path in sorted(Path(args.evaluation).glob("traces/*/*.jsonl")):
        ep = read_episode(path)
        preset = path.parent.name
        episodes[preset] += 1
        for rec, st in states_along(ep):
            action = rec.menu.request if rec.menu is not None else rec.action  # a menu answer is a number
            same = is_focus(action) and focus_counts(rec) and refocuses(argument_of(action), st.focused)
            if same:
                repeats[preset] += 1
                print(f"{preset:12s} {ep.header.task:45s} v{ep.header.variation:<4d} step {rec.step:3d} "
                      f"'{action}' (already focused: {same}): {rec.observation.strip()[:50]!r}, reward "
                      f"{rec.reward:g}, ended {rec.done}, final {ep.summary.final_score if ep.summary else '-'}")
    print()
    for preset in sorted(episodes):
        print(f"{preset:12s} {episodes[preset]:4d} episodes, {repeats[preset]} repeated focus(es) played")


if __name__ == "__main__":
    main()
