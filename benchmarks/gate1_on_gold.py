"""How often Gate-1 fires against expert play: gold paths of train (or dev) variations replayed in the real game,
Gate-1 run on every gold action in the state before it, as the agent runs it on Swift's actions (the valid
actions, the room and inventory text, the game's object names, the focus count; no stagnation list, and no
embedder, so not the nearest-match repair that the Critic's and Sage's free text may get). A drop of a gold
action is a rule firing against a move that an expert made; the game's reply when the action is then played says
whether the drop would have cost anything (accepted, rewarded) or spared a wasted step.

Test variations are never used: a rule tuned on test failures would be tuned to the test.

    .venv/bin/python benchmarks/gate1_on_gold.py --variations 2            # first 2 train variations of all 30 tasks
    .venv/bin/python benchmarks/gate1_on_gold.py --split dev --tasks boil melt --out /tmp/gate1_gold.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.actions import is_focus  # noqa: E402
from agent_core.config import EnvConfig, SRMConfig  # noqa: E402
from agent_core.env import ScienceWorld  # noqa: E402
from agent_core.gold import focus_limit  # noqa: E402
from agent_core.srm.gate1 import DROP, Gate1, GateContext  # noqa: E402
from agent_core.task_catalog import catalog  # noqa: E402


def drops_on_gold(split: str, variations: int, tasks: list[str], log=print) -> tuple[int, list[dict]]:
    """(gold steps checked, one dict per dropped gold action)."""
    cat = catalog()
    names = {cat.get(i).name for i in range(len(cat.tasks))}
    if set(tasks) - names:
        raise SystemExit(f"unknown task(s): {', '.join(sorted(set(tasks) - names))}")
    gate = Gate1(SRMConfig())
    out: list[dict] = []
    steps = 0
    t0 = time.perf_counter()
    env = ScienceWorld(EnvConfig(step_limit=100_000, fresh_jvm=False))
    try:
        for info in (cat.get(i) for i in range(len(cat.tasks))):
            if tasks and info.name not in tasks:
                continue
            for var in getattr(info, split)[:variations]:
                obs = env.reset(info.name, var, split=split, generate_gold=True)
                focus_done = 0
                for i, action in enumerate(env.gold_actions(), 1):
                    if obs.done:
                        break
                    d = None
                    if not obs.menu:  # a menu's number is answered by the agent's menu rule, not checked by Gate-1
                        ctx = GateContext(valid=env.valid_actions(), look=obs.look, inventory=obs.inventory,
                                          focus_done=focus_done, focus_limit=focus_limit(info.name),
                                          object_names=env.object_names)
                        d = gate.check(action, "swift", ctx)
                    nxt = env.step(action)
                    steps += 1
                    if d is not None and d.decision == DROP:
                        out.append({"task": info.name, "variation": var, "step": i, "action": action,
                                    "reason": d.reason, "detail": d.detail, "reward": nxt.reward,
                                    "accepted": nxt.action_valid and not nxt.menu, "reply": nxt.text[:160]})
                    focus_done += is_focus(action) and nxt.action_valid
                    obs = nxt
                log(f"{info.name} v{var}: final {obs.score:g}; {len(out)} drops in {steps} gold steps so far "
                    f"({time.perf_counter() - t0:.0f} s)")
    finally:
        env.close()
    return steps, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="train", choices=["train", "dev"])
    ap.add_argument("--variations", type=int, default=2, help="the first N variations of each task in the split")
    ap.add_argument("--tasks", nargs="*", default=[], help="task names (default: all 30)")
    ap.add_argument("--out", default=None, help="write every drop to this JSON file")
    args = ap.parse_args()
    steps, drops = drops_on_gold(args.split, args.variations, args.tasks)
    if args.out:
        Path(args.out).write_text(json.dumps(drops, indent=1))
    print(f"\n{steps} gold steps ({args.split}, first {args.variations} variations): {len(drops)} gold actions dropped")
    print(f"{'reason':28s} {'drops':>6s} {'game accepted':>14s} {'rewarded':>9s}")
    by = Counter(d["reason"] for d in drops)
    for reason, n in by.most_common():
        mine = [d for d in drops if d["reason"] == reason]
        print(f"{reason:28s} {n:6d} {sum(d['accepted'] for d in mine):14d} {sum(d['reward'] > 0 for d in mine):9d}")


if __name__ == "__main__":
    main()
