"""How often Gate-1 fires against expert play: gold paths of train (or dev) variations replayed in the real game,
Gate-1 run on every gold action in the state before it, as the agent runs it on Swift's actions (the valid
actions, the room and inventory text, the game's object names, the focus count; no stagnation list, and no
embedder, so not the nearest-match repair that the Critic's and Sage's free text may get). A drop of a gold
action is a rule firing against a move that an expert made; the game's reply when the action is then played says
whether the drop would have cost anything (accepted, rewarded) or spared a wasted step.

Test variations are never used: a rule tuned on test failures would be tuned to the test.

    .venv/bin/python benchmarks/gate1_on_gold.py --variations 2            # first 2 train variations of all 30 tasks
    .venv/bin/python benchmarks/gate1_on_gold.py --split dev --tasks boil melt --out /tmp/gate1_gold.json
    .venv/bin/python benchmarks/gate1_on_gold.py --variations 1 --wrong-focus-first   # FOCUS_LIMIT's premise
    .venv/bin/python benchmarks/gate1_on_gold.py --variations 1 --repeat-focus        # a focus taken twice
    .venv/bin/python benchmarks/gate1_on_gold.py --variations 2 --unseen-by text      # the earlier target-unseen rule

--wrong-focus-first plays one wrong `focus on` (an object in the starting room that no gold focus names) before the
gold path: does the task end on it, can the gold path still earn full marks after it, and does FOCUS_LIMIT then
drop the gold focus under each counting rule (srm.focus_limit_counts: "taken" or "rewarded")?

--repeat-focus plays each gold `focus on` twice in a row: does the game end the episode, change the score, or
take the second one as a no-op? (FOCUS_LIMIT drops the second; the question is what that spares.) The gold path
then goes on, and its final score says whether the repeat cost anything later.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.actions import ROOMS, argument_of, canonical, is_focus  # noqa: E402
from agent_core.config import EnvConfig, SRMConfig  # noqa: E402
from agent_core.env import ScienceWorld  # noqa: E402
from agent_core.gold import focus_limit, focus_unrewarded_limit  # noqa: E402
from agent_core.srm.gate1 import DROP, Gate1, GateContext  # noqa: E402
from agent_core.task_catalog import catalog  # noqa: E402


def wrong_focus(valid: list[str], gold: list[str], look: str) -> str | None:
    """A `focus on` an object in the starting room that no gold focus of this path names (no shared word with any
    gold focus target), first in sorted order: deterministic, and plainly not the task's object."""
    words = {w for a in gold if is_focus(a) for w in argument_of(canonical(a)).split()}
    seen = set(look.lower().replace("(", " ").replace(")", " ").replace(",", " ").split())
    for v in sorted(valid):
        arg = argument_of(canonical(v))
        if (is_focus(v) and arg and arg not in ROOMS and set(arg.split()) <= seen
                and not set(arg.split()) & (words | {"agent", "air", "floor", "ceiling", "wall", "door"})):
            return v
    return None


def drops_on_gold(split: str, variations: int, tasks: list[str], log=print,
                  wrong_first: bool = False, repeat_focus: bool = False,
                  unseen_by: str = "tree") -> tuple[int, list[dict], list[dict]]:
    """(gold steps checked, one dict per dropped gold action, one dict per path with a wrong focus first)."""
    cat = catalog()
    names = {cat.get(i).name for i in range(len(cat.tasks))}
    if set(tasks) - names:
        raise SystemExit(f"unknown task(s): {', '.join(sorted(set(tasks) - names))}")
    gate = Gate1(SRMConfig(gate1_unseen_by=unseen_by))
    gate_taken = Gate1(SRMConfig(focus_limit_counts="taken"))
    out: list[dict] = []
    probes: list[dict] = []
    steps = 0
    t0 = time.perf_counter()
    env = ScienceWorld(EnvConfig(step_limit=100_000, fresh_jvm=False))
    try:
        for info in (cat.get(i) for i in range(len(cat.tasks))):
            if tasks and info.name not in tasks:
                continue
            for var in getattr(info, split)[:variations]:
                obs = env.reset(info.name, var, split=split, generate_gold=True)
                gold = list(env.gold_actions())
                focus_done = unrewarded = 0
                focused: list[str] = []
                probe: dict | None = None
                if wrong_first:
                    wrong = wrong_focus(env.valid_actions(), gold, obs.look)
                    if wrong is None:
                        log(f"{info.name} v{var}: no wrong focus to try")
                        continue
                    nxt = env.step(wrong)
                    probe = {"task": info.name, "variation": var, "wrong": wrong, "reply": nxt.text[:160],
                             "menu": bool(nxt.menu), "ended": nxt.done, "score_after_wrong": nxt.score,
                             "focus_limit": focus_limit(info.name), "dropped_taken": [], "dropped_rewarded": []}
                    probes.append(probe)
                    if nxt.done or nxt.menu:
                        log(f"{info.name} v{var}: '{wrong}' -> ended {nxt.done}, menu {bool(nxt.menu)}, score {nxt.score:g}")
                        continue
                    focus_done, unrewarded, obs = 1, int(nxt.reward <= 0), nxt
                    focused.append(argument_of(wrong))
                for i, action in enumerate(gold, 1):
                    if obs.done:
                        break
                    d = None
                    if not obs.menu:  # a menu's number is answered by the agent's menu rule, not checked by Gate-1
                        ctx = GateContext(valid=env.valid_actions(), look=obs.look, inventory=obs.inventory,
                                          focus_done=focus_done, focus_unrewarded=unrewarded,
                                          focus_unrewarded_gold=focus_unrewarded_limit(info.name),
                                          focus_limit=focus_limit(info.name), focused=focused,
                                          object_names=env.object_names, reach=env.reach)
                        d = gate.check(action, "swift", ctx)
                        if probe is not None:
                            for key, g in (("dropped_taken", gate_taken), ("dropped_rewarded", gate)):
                                if g.check(action, "swift", ctx).reason == "FOCUS_LIMIT":
                                    probe[key].append(action)
                    nxt = env.step(action)
                    steps += 1
                    if d is not None and d.decision == DROP:
                        out.append({"task": info.name, "variation": var, "step": i, "action": action,
                                    "reason": d.reason, "detail": d.detail, "reward": nxt.reward,
                                    "accepted": nxt.action_valid and not nxt.menu, "reply": nxt.text[:160]})
                    if is_focus(action) and nxt.action_valid:
                        focus_done += 1
                        unrewarded += nxt.reward <= 0
                        focused.append(argument_of(action))
                    if repeat_focus and is_focus(action) and nxt.action_valid and not nxt.done and not nxt.menu:
                        ctx = GateContext(valid=env.valid_actions(), look=nxt.look, inventory=nxt.inventory,
                                          focus_done=focus_done, focus_unrewarded=unrewarded,
                                          focus_unrewarded_gold=focus_unrewarded_limit(info.name),
                                          focus_limit=focus_limit(info.name), focused=focused,
                                          object_names=env.object_names, reach=env.reach)
                        gate_says = gate.check(action, "swift", ctx).reason
                        again = env.step(action)
                        probes.append({"task": info.name, "variation": var, "focus": action, "reply": again.text[:160],
                                       "ended": again.done, "menu": bool(again.menu), "reward": again.reward,
                                       "score_before": nxt.score, "score_after": again.score, "gate1": gate_says})
                        nxt = again
                    obs = nxt
                if probe is not None:
                    probe["final"] = obs.score
                for p in probes:
                    if repeat_focus and p["task"] == info.name and p["variation"] == var:
                        p["final"] = obs.score
                log(f"{info.name} v{var}: final {obs.score:g}; {len(out)} drops in {steps} gold steps so far "
                    f"({time.perf_counter() - t0:.0f} s)")
    finally:
        env.close()
    return steps, out, probes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="train", choices=["train", "dev"])
    ap.add_argument("--variations", type=int, default=2, help="the first N variations of each task in the split")
    ap.add_argument("--tasks", nargs="*", default=[], help="task names (default: all 30)")
    ap.add_argument("--out", default=None, help="write every drop to this JSON file")
    ap.add_argument("--wrong-focus-first", action="store_true",
                    help="take one wrong `focus on` before each gold path (FOCUS_LIMIT's premise)")
    ap.add_argument("--unseen-by", default="tree", choices=["tree", "text"],
                    help="what decides TARGET_NOT_VISIBLE (srm.gate1_unseen_by): the game's object tree or the text")
    ap.add_argument("--repeat-focus", action="store_true", help="play each gold `focus on` twice in a row")
    args = ap.parse_args()
    if args.wrong_focus_first and args.repeat_focus:
        raise SystemExit("--wrong-focus-first and --repeat-focus are separate probes: take one")
    steps, drops, probes = drops_on_gold(args.split, args.variations, args.tasks, wrong_first=args.wrong_focus_first,
                                         repeat_focus=args.repeat_focus, unseen_by=args.unseen_by)
    if args.out:
        Path(args.out).write_text(json.dumps({"drops": drops, "repeat_focus" if args.repeat_focus else "wrong_focus": probes}
                                             if probes else drops, indent=1))
    if probes and args.repeat_focus:
        print(f"\nEach gold focus played twice ({args.split}, {len(probes)} repeats): the repeat ended the episode in "
              f"{sum(p['ended'] for p in probes)}, raised a menu in {sum(p['menu'] for p in probes)}, changed the score "
              f"in {sum(p['score_after'] != p['score_before'] for p in probes)}; Gate-1 said "
              f"{dict(Counter(p['gate1'] for p in probes))}; paths still at 100 at the end: "
              f"{len({(p['task'], p['variation']) for p in probes if p.get('final') == 100})} of "
              f"{len({(p['task'], p['variation']) for p in probes})}")
        for p in probes:
            if p["ended"] or p["menu"] or p["score_after"] != p["score_before"] or p.get("final") != 100:
                print(f"  {p['task']} v{p['variation']} '{p['focus']}': {p['reply'][:80]!r} score {p['score_before']:g} "
                      f"-> {p['score_after']:g}, ended {p['ended']}, final {p.get('final')}")
    elif probes:
        went_on = [p for p in probes if not p["ended"] and not p["menu"]]
        print(f"\nA wrong focus first ({args.split}, {len(probes)} paths): the episode ended on it in "
              f"{sum(p['ended'] for p in probes)}, raised a menu in {sum(p['menu'] for p in probes)}, went on in "
              f"{len(went_on)}")
        print(f"{'task':45s} {'v':>4s} {'limit':>5s} {'final':>6s}  FOCUS_LIMIT drops of gold: taken / rewarded")
        for p in went_on:
            print(f"{p['task']:45s} {p['variation']:4d} {str(p['focus_limit']):>5s} {p.get('final', 0):6g}  "
                  f"{len(p['dropped_taken'])} / {len(p['dropped_rewarded'])}")
        print(f"gold paths that still reached 100 after the wrong focus: {sum(p.get('final') == 100 for p in went_on)}; "
              f"of those, FOCUS_LIMIT dropped a gold focus under 'taken' in "
              f"{sum(p.get('final') == 100 and bool(p['dropped_taken']) for p in went_on)}, under 'rewarded' in "
              f"{sum(p.get('final') == 100 and bool(p['dropped_rewarded']) for p in went_on)}")
    print(f"\n{steps} gold steps ({args.split}, first {args.variations} variations): {len(drops)} gold actions dropped")
    print(f"{'reason':28s} {'drops':>6s} {'game accepted':>14s} {'rewarded':>9s}")
    by = Counter(d["reason"] for d in drops)
    for reason, n in by.most_common():
        mine = [d for d in drops if d["reason"] == reason]
        print(f"{reason:28s} {n:6d} {sum(d['accepted'] for d in mine):14d} {sum(d['reward'] > 0 for d in mine):9d}")


if __name__ == "__main__":
    main()
