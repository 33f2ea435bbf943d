"""Swift's loop guard: it breaks the loops a weak model falls into, and never blocks a gold action."""
from agent_core.swift.data import load_trajectories
from agent_core.swift.format import is_noop
from agent_core.swift.format import HistoryStep
from agent_core.srm.loop_guard import STREAK, apply_loop_guard, loop_reason
from agent_core.swift.model import SwiftProposal


def _moves(*rooms: str) -> list[HistoryStep]:
    return [HistoryStep(f"go to {r}", f"You move to the {r}.", 0.0, r) for r in rooms]


def test_room_bounce_is_broken_with_the_next_ranked_valid_action():
    hist = _moves("kitchen", "hallway", "kitchen")  # now in the kitchen, about to go to the hallway again
    prop = SwiftProposal(top1="open door to hallway", candidates=[("open door to hallway", -0.3)],
                         valid_ranked=[("go to hallway", -0.8), ("go to outside", -0.9), ("pick up pot", -1.1)],
                         action="go to hallway")
    out = apply_loop_guard(prop, hist)
    assert out.action == "go to outside"
    assert "bouncing" in out.guard and out.top1 == "open door to hallway"
    # a reward inside the cycle means progress: no intervention
    hist[1] = HistoryStep("go to hallway", "You move to the hallway.", 5.0, "hallway")
    assert apply_loop_guard(prop, hist).action == "go to hallway"


def test_no_news_streak_is_broken_but_shorter_repeats_are_allowed():
    step = HistoryStep("wait1", "You decide to wait for 1 iterations.", 0.0, "greenhouse")
    prop = SwiftProposal(top1="wait1", candidates=[], valid_ranked=[("wait1", -0.1), ("look at pot", -2.0)],
                         action="wait1")
    assert apply_loop_guard(prop, [step] * (STREAK - 1)).action == "wait1"
    out = apply_loop_guard(prop, [step] * STREAK)
    assert out.action == "look at pot" and "streak" in out.guard
    # nothing else ranked: the action is kept and the record says so
    alone = SwiftProposal(top1="wait1", candidates=[], valid_ranked=[("wait1", -0.1)], action="wait1")
    out = apply_loop_guard(alone, [step] * STREAK)
    assert out.action == "wait1" and "kept it" in out.guard


def test_guard_never_blocks_a_gold_action():
    trajs = load_trajectories("train") + load_trajectories("dev")
    assert len(trajs) > 500
    blocked, steps = [], 0
    for t in trajs:
        hist: list[HistoryStep] = []
        for s in t["steps"]:
            if is_noop(s["action"], s["observation"]):
                continue
            steps += 1
            if loop_reason(s["action"], hist):
                blocked.append((t["task"], t["variation"], s["action"]))
            hist.append(HistoryStep(s["action"], s["observation"], s["reward"], s["room"]))
    assert steps > 20000 and blocked == []
