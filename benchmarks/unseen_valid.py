"""Gate-1's target unseen against the game's own valid-action list: gold paths of train (or dev) variations replayed
in the real game, and at every state on the way each valid action asked whether it names an object out of view
(room text, inventory, the game's other names of what the text shows, and the object tree), once without and once
with identical objects' names taken as one kind (`seen_by_another_name(by_kind=...)`; the tree's names compared
without articles in both, a fix of the same commit). The
valid-action list names identical objects by any of their names joined to their container's (`apple seed in the
seed stage on cup containing apple seed` for a seed the room text lists in "a seed jar (containing a apple seed,
...)"), and the game's action names for five identical seeds change from one call to the next, so the earlier rule
dropped actions on a seed in plain view. A sample of the actions only the earlier rule dropped is then played from
the same state (the gold prefix replayed): "No known action matches that input" would mean the drop was right.

Test variations are never used: a rule tuned on test failures would be tuned to the test.

    .venv/bin/python benchmarks/unseen_valid.py --tasks grow-plant grow-fruit --variations 2
    .venv/bin/python benchmarks/unseen_valid.py --variations 1 --every 4 --play 2   # all 30 tasks, every 4th state
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.actions import seen_by_another_name, seen_in_reach, unseen_words  # noqa: E402
from agent_core.config import EnvConfig  # noqa: E402
from agent_core.env import ScienceWorld  # noqa: E402
from agent_core.task_catalog import catalog  # noqa: E402


def unseen(env: ScienceWorld, obs, by_kind: bool) -> set[str]:
    """The valid actions of this state that Gate-1's target unseen drops (srm.gate1_unseen_by = "tree")."""
    reach, names = env.reach(), env.object_names()
    out = set()
    for a in env.valid_actions():
        miss = unseen_words(a, obs.look, obs.inventory)
        if miss:
            miss = seen_by_another_name(a, miss, obs.look, obs.inventory, names, by_kind=by_kind)
        if miss and seen_in_reach(a, miss, reach):
            out.add(a)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="train", choices=["train", "dev"])
    ap.add_argument("--variations", type=int, default=1, help="the first N variations of the split per task")
    ap.add_argument("--tasks", nargs="*", default=[])
    ap.add_argument("--every", type=int, default=1, help="check every Nth state of a gold path")
    ap.add_argument("--play", type=int, default=2, help="actions only the earlier rule dropped, played per path")
    args = ap.parse_args()
    cat = catalog()
    env = ScienceWorld(EnvConfig(step_limit=100_000, fresh_jvm=False))
    rng = random.Random(0)
    tot = {"states": 0, "valid": 0, "earlier": 0, "now": 0, "only_now": 0, "played": 0, "known": 0}
    t0 = time.perf_counter()
    try:
        for name in (args.tasks or cat.names()):
            info = cat.get(name)
            for var in getattr(info, args.split)[:args.variations]:
                obs = env.reset(name, var, split=args.split, generate_gold=True)
                gold = list(env.gold_actions())
                freed: list[tuple[int, str]] = []
                before = tot["earlier"]
                for i, action in enumerate(gold):
                    if obs.done:
                        break
                    if not obs.menu and i % args.every == 0:
                        earlier, now = unseen(env, obs, False), unseen(env, obs, True)
                        tot["states"] += 1
                        tot["valid"] += len(env.valid_actions())
                        tot["earlier"] += len(earlier)
                        tot["now"] += len(now)
                        tot["only_now"] += len(now - earlier)
                        freed += [(i, a) for a in sorted(earlier - now)]
                    obs = env.step(action)
                plays = rng.sample(freed, min(args.play, len(freed)))
                for i, a in plays:
                    env.reset(name, var, split=args.split)
                    for g in gold[:i]:
                        env.step(g)
                    reply = env.step(a).text
                    tot["played"] += 1
                    tot["known"] += "No known action" not in reply
                    print(f"    played '{a}' (gold step {i + 1}) -> {reply[:70]!r}", flush=True)
                print(f"{name} v{var}: {tot['earlier'] - before} -> {tot['earlier'] - before - len(freed)} dropped "
                      f"({len(freed)} let through) ({time.perf_counter() - t0:.0f} s)", flush=True)
    finally:
        env.close()
    print(f"\n{tot['states']} states, {tot['valid']} valid actions: target unseen dropped {tot['earlier']} under the "
          f"earlier rule, {tot['now']} with identical objects as one kind ({tot['only_now']} dropped only now); "
          f"{tot['known']} of {tot['played']} let-through actions played were known to the game")


if __name__ == "__main__":
    main()
