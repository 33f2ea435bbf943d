"""Narration (views/narration.py): every kind of step record gets plain sentences that name the right actor
and the right reason; generated from the record alone, the same every time."""
from __future__ import annotations

import pytest

from agent_core.trace import (CriticCall, Gate1Decision, LLMCall, MemoryRetrieval, MemoryWrite, MenuChoice,
                              StagnationReport, StepRecord, SwiftCandidate, Trigger)
from memory_store.scoring import RetrievalResult, ScoredCandidate
from views.narration import narrate, narration_track


def _rec(**kw) -> StepRecord:
    base = dict(step=3, action="pick up metal pot", system="swift", observation="You pick up the pot.", look="kitchen",
                inventory="a pot", score=10.0, reward=0.0, moves=3, done=False, failed=False, room="kitchen",
                action_valid=True, swift_valid_ranked=[SwiftCandidate("pick up metal pot", -0.2, True)])
    base.update(kw)
    return StepRecord(**base)


def _call(purpose="plan", error=None, kind=None):
    return LLMCall(purpose=purpose, backend="embedded", model="m", prompt="p", output="" if error else "x", error=error,
                   error_kind=kind)


def _text(rec) -> str:
    out = " ".join(narrate(rec))
    assert out == " ".join(narrate(rec))  # deterministic
    assert 2 <= len(narrate(rec)) <= 3
    return out


@pytest.mark.parametrize("trigger, system, calls, expect", [
    ("invalid", "sage", [_call(), _call("ground")], ["Swift wanted to 'fly to the moon'", "the game would not accept it",
                                                      "Sage was asked", "it picked 'pick up metal pot'"]),
    ("critical", "sage", [_call("focus_review")], ["a wrong 'focus on' ends the task",
                                                    "Sage was asked to check which object to focus on"]),
    ("stuck", "sage", [_call(), _call("ground")], ["the last 5 steps earned no points", "Sage was asked"]),
    ("unexpected", "sage", [_call(), _call("ground")], ["the last observation reported a problem"]),
    ("gate1_drops", "sage", [_call(), _call("ground")], ["Gate-1 dropped the actions it had"]),
    ("invalid", "swift", [_call(error="cannot reach the LLM server at http://x")],
     ["its model call failed (cannot reach the LLM server", "so Swift's 'pick up metal pot' was taken"]),
    ("invalid", "swift", [_call(error="[embedded] m did not finish within 120 s", kind="timeout")],
     ["its model call timed out (", "so Swift's 'pick up metal pot' was taken"]),
    ("invalid", "swift", [_call(error="[embedded] cancelled after 12 tokens", kind="cancelled")],
     ["its model call was stopped by Pause (", "so Swift's 'pick up metal pot' was taken"]),
    ("stuck", "swift", [_call(), _call("ground")], ["Sage gave nothing better, so Swift's 'pick up metal pot'"]),
])
def test_switching_triggers_name_the_actor_and_the_reason(trigger, system, calls, expect):
    ev = {"swift_top1": "fly to the moon"} if trigger == "invalid" else {"swift_action": "focus on orange juice"} \
        if trigger == "critical" else {}
    text = _text(_rec(system=system, trigger=Trigger(trigger, f"{trigger}: rule", ev), llm_calls=calls))
    for e in expect:
        assert e in text, (e, text)
    if trigger == "critical":
        assert "Swift wanted to 'focus on orange juice'" in text


def test_swift_alone_the_buffer_the_critic_and_returning_to_swift():
    assert _text(_rec()).startswith("Swift chose 'pick up metal pot', its most likely valid action.")
    sure = _text(_rec(action="focus on water", swift_valid_ranked=[SwiftCandidate("focus on water", -0.1, True)]))
    assert "a 'focus on' it was sure of" in sure
    assert _text(_rec(system="sage")).startswith("Sage's plan went on: 'pick up metal pot' was the next action")
    assert _text(_rec(system="critic")).startswith("The Critic's suggestion 'pick up metal pot' was taken")
    back = _text(_rec(trigger=Trigger("buffer_empty", "back to Swift")))
    assert back.startswith("Sage's buffer was empty, so Swift took over again: it chose 'pick up metal pot'")
    forced = _text(_rec(trigger=Trigger("swift_forced", "back to Swift", {"set_aside": ["invalid"],
                                                                         "sage_calls_in_a_row": 2})))
    assert forced.startswith("Sage had been asked 2 times in a row, so this time Swift acted on its own")
    assert "it chose 'pick up metal pot'" in forced


@pytest.mark.parametrize("decision, reason, expect", [
    ("DROP", "NOT_IN_VALID_ACTIONS", "Gate-1 stopped 'pour pot in sky' before it ran (not a valid action in the "
                                     "current state)"),
    ("DROP", "FOCUS_LIMIT", "Gate-1 stopped 'pour pot in sky' before it ran (one 'focus on' too many"),
    ("DROP", "STAGNATION_AVOID", "(the stagnation report says to avoid this action for now)"),
    ("REPAIR", "REPAIR_ALIAS", "Gate-1 repaired 'pour pot in sky' into 'pick up metal pot' (a known alias"),
    ("REPAIR", "REPAIR_CASE", "(differed from a valid action only in upper/lower case)"),
])
def test_gate1_decisions(decision, reason, expect):
    g = Gate1Decision(source="sage", proposed="pour pot in sky", decision=decision, reason=reason,
                      result=None if decision == "DROP" else "pick up metal pot")
    text = _text(_rec(gate1=[g]))
    assert expect in text, text
    accept = Gate1Decision(source="swift", proposed="x", decision="ACCEPT", reason="VALID", result="x")
    assert "Gate-1" not in _text(_rec(gate1=[accept]))  # an accepted action needs no sentence


def _retrieval(trigger: str, into: str, winner: str) -> MemoryRetrieval:
    scores = {"recency_n": 0.1, "importance_n": 0.1, "relevance_n": 0.1, winner: 0.95}
    c = ScoredCandidate(id="m7", description="TASK: boil | ROOM: kitchen | ACTION: activate stove | RESULT: on",
                        type="observation", tag="success", importance=7, recency=0.9, relevance=0.8, score=1.2,
                        last_access=1, created=1, **scores)
    res = RetrievalResult(query="q", trigger=trigger, now=5, weights={"recency": 1, "importance": 1, "relevance": 1},
                          candidates=[c], top_ids=["m7"])
    return MemoryRetrieval(trigger=trigger, why="w", query="q", result=res, injected_into=into, injected_ids=["m7"])


@pytest.mark.parametrize("trigger, into, winner, words", [
    ("T1", "swift", "relevance_n", ["Memory (T1) gave Swift's retry 1 record(s)", "about 'activate stove'",
                                    "won mostly on relevance"]),
    ("T4", "sage", "importance_n", ["Memory (T4) gave Sage's prompt", "won mostly on importance"]),
    ("critic", "critic", "recency_n", ["gave the Critic's prompt", "won mostly on recency"]),
])
def test_retrievals_say_which_of_the_three_scores_won(trigger, into, winner, words):
    text = _text(_rec(retrievals=[_retrieval(trigger, into, winner)]))
    for w in words:
        assert w in text, (w, text)


def test_memory_failures_and_writes():
    failed = MemoryRetrieval(trigger="T4", why="w", query="q", error="retrieval failed")
    assert "A memory lookup (T4) failed, so the prompt stayed as it was." in _text(_rec(retrievals=[failed]))
    logged = MemoryRetrieval(trigger="T2", why="w", query="q", result=None)  # retrieved and cached only
    assert "Memory" not in _text(_rec(retrievals=[logged]))
    w = MemoryWrite(tag="near-miss", rule="small_reward", why="reward +5 (progress below 20); more", text="t", id="m9")
    assert "This step was stored as a near-miss memory (reward +5)." in _text(_rec(memories_written=[w]))


def test_critic_and_stagnation():
    rep = StagnationReport(modes=["MOVE_SPAM_4_OF_5", "SAME_OBS_3"])
    text = _text(_rec(stagnation=rep))
    assert "The stagnation detector noticed that it kept moving between rooms" in text and "(and 1 more signs)" in text
    called = CriticCall(status="called", report_step=2, diagnosis="It keeps walking in circles.",
                        admitted=["activate stove", "pick up pot"], budget_used=1, budget=3)
    text = _text(_rec(critic=called, stagnation=rep))
    assert "The Critic diagnosed 'It keeps walking in circles.' and put 2 action(s) into the buffer (call 1 of 3)" in text
    failed = CriticCall(status="failed", report_step=2, error="timed out after 120 s")
    assert "The Critic was called but its model call failed (timed out after 120 s)" in _text(_rec(critic=failed))
    skipped = CriticCall(status="cooldown", report_step=2, reason="the last Critic call was 2 steps ago")
    assert "A Critic call was due but skipped: the last Critic call was 2 steps ago" in _text(_rec(critic=skipped))


def test_menu_and_scores():
    m = MenuChoice(request="focus on paint", options=["red paint", "blue paint"], chosen=1, chooser="gate1",
                   why="the task names blue paint")
    assert "Gate-1 answered 1 ('blue paint'): the task names blue paint." in _text(_rec(menu=m, action="1"))
    cancel = MenuChoice(request="focus on paint", options=["a", "b"], chosen=-1, chooser="gate1", why="no match")
    assert "cancelled the question rather than guess" in _text(_rec(menu=cancel, action=""))
    assert _text(_rec(reward=25.0, score=35.0)).endswith("It earned +25 points (now 35).")
    assert _text(_rec(score=100.0, reward=60.0, done=True)).endswith("Task complete: the score reached 100.")
    assert _text(_rec(score=-100.0, failed=True, done=True)).endswith("The task failed here: the score fell to -100.")
    assert _text(_rec(action_valid=False)).endswith("The game did not accept it; the score stays at 10.")


def test_text_track_has_one_line_per_step():
    recs = [_rec(step=1), _rec(step=2, system="sage"), _rec(step=3, reward=10.0, score=20.0)]
    track = narration_track(recs)
    assert [t.split(".")[0] for t in track] == ["Step 1", "Step 2", "Step 3"] and "Sage's plan" in track[1]


def test_a_pick_that_plays_another_object_than_the_plan_named_is_said():
    from agent_core.decisions import OptionScores
    from agent_core.trace import Trigger
    from views.narration import plan_pick_sentence

    plat = "move block to inclined plane with a platinum surface"
    alu = "move block to inclined plane with a aluminum surface"
    plan = {"Q3": "Slide the block down the plane with the most friction.",
            "Q4": "Move the block to the inclined plane with the aluminum surface now."}
    rec = _rec(step=7, action=plat, system="sage", plan=plan,
               trigger=Trigger(name="stuck", rule="stuck: no points"),
               decisions=[OptionScores(options=[plat, alu, "look around"], scores=[-0.4, -0.5, -2.0])])
    said = plan_pick_sentence(rec)
    assert said == f"The plan named aluminum; the pick played platinum ('{plat}')."
    assert said in narrate(rec)
    # a pick that follows the plan, or a step Swift took, says nothing of the kind
    assert plan_pick_sentence(_rec(step=7, action=alu, system="sage", plan=plan, decisions=rec.decisions)) is None
    assert plan_pick_sentence(_rec(step=7, action=plat, system="swift", plan=plan, decisions=rec.decisions)) is None
