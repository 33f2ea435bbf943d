"""Every TARGET_NOT_VISIBLE drop in an evaluation's traces, asked again of the game's object tree: the episode's
recorded actions are played again in the real game (the valid actions asked before each one, as the agent asks
them, so the game names objects as it did), and at each drop the action is checked under
srm.gate1_unseen_by = "tree" by the code it runs at. A drop that code lets through is one an earlier rule made (the
text-only rule; before 82367b7, also the one that missed identical objects' other names) and the current rule would
not: that episode plays differently from there on, and its pair is to be played again. A replay whose room text
parts from the record is reported and not judged.

    .venv/bin/python benchmarks/unseen_drops.py assets/evaluations/cpu-30x2x30 --presets srm full
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.config import SRMConfig  # noqa: E402
from agent_core.env import ScienceWorld  # noqa: E402
from agent_core.srm.gate1 import Gate1, GateContext  # noqa: E402
from agent_core.trace import read_episode  # noqa: E402


def tree_verdicts(env: ScienceWorld, ep) -> tuple[list[tuple[int, str, str, bool]], str | None]:
    """[(step, source, admitted action, the tree lets it through)] for the episode's TARGET_NOT_VISIBLE drops, and
    the step where the replay parted from the record (None when it did not)."""
    h = ep.header
    gate = Gate1(SRMConfig(gate1_unseen_by="tree"))
    obs = env.reset(h.task, h.variation, split=h.split or None)
    out = []
    for rec in ep.steps:
        valid = env.valid_actions()  # asked every step, as the agent does: the game's later names depend on it
        for d in rec.gate1:
            if d.reason != "TARGET_NOT_VISIBLE":
                continue
            m = re.match(r"'(.+?)' names ", d.detail or "")
            action = m.group(1) if m else d.proposed  # the admitted action the drop judged
            ctx = GateContext(valid=valid, look=obs.look, inventory=obs.inventory, object_names=env.object_names,
                              reach=env.reach)
            out.append((rec.step, d.source, action, gate.check(action, d.source, ctx).reason != "TARGET_NOT_VISIBLE"))
        obs = env.step(rec.action)
        if " ".join(obs.look.split()) != " ".join((rec.look or "").split()):
            return out, f"step {rec.step}"
    return out, None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("evaluation", help="an evaluation directory (its traces/<preset>/*.jsonl)")
    ap.add_argument("--presets", nargs="*", default=["srm", "full"], help="preset folders to read (those with Gate-1)")
    args = ap.parse_args()
    differs = total = parted = 0
    with ScienceWorld() as env:
        for preset in args.presets:
            for path in sorted(Path(args.evaluation).glob(f"traces/{preset}/*.jsonl")):
                ep = read_episode(path)
                if not any(d.reason == "TARGET_NOT_VISIBLE" for rec in ep.steps for d in rec.gate1):
                    continue
                total += 1
                verdicts, part = tree_verdicts(env, ep)
                through = [v for v in verdicts if v[3]]
                parted += part is not None
                differs += bool(through)
                print(f"{'differs' if through else 'same   '} {preset}/{path.name}: {len(verdicts)} drop(s)"
                      + ("; the tree lets through " + ", ".join(f"step {s} {src} '{a}'" for s, src, a, _ in through)
                         if through else "") + (f"; replay parted from the record at {part}" if part else ""))
    print(f"\n{total} episode(s) with a TARGET_NOT_VISIBLE drop; {differs} would play differently under "
          f"srm.gate1_unseen_by = tree; {parted} replay(s) parted from the record")


if __name__ == "__main__":
    main()
