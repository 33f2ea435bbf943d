"""Self-reflection and memory do no harm, and Sage chooses by meaning: each rule is a config field, and each test
shows the earlier rule (the field's other value) doing what an evaluation caught it doing."""
from __future__ import annotations

import dataclasses
import random
from types import SimpleNamespace

import pytest

from agent_core.actions import seen_by_another_name, unseen_words
from agent_core.config import AMMConfig, SRMConfig, apply_overrides, preset
from agent_core.control.draft import StepDraft
from agent_core.control.swift_turn import SwiftTurn
from agent_core.llm import ScriptedBackend
from agent_core.sage import Sage, SageContext
from agent_core.srm.critic import StagnationReport, rank_valid
from agent_core.srm.gate1 import DROP, Gate1, GateContext
from agent_core.srm.stagnation import detect
from agent_core.swift.model import SwiftProposal
from agent_core.trace import MemoryRetrieval

KITCHEN = """This room is called the kitchen. In it, you see:
	the agent
	a substance called air
	a cupboard. The cupboard door is closed.
	a fridge. The fridge door is open. In the fridge is: a wood cup (containing orange juice).
	a stove, which is turned off. On the stove is: nothing.
	a sink, which is turned off. In the sink is: nothing.
	a thermometer, currently reading a temperature of 10 degrees celsius
You also see:
	A door to the hallway (that is open)"""
VALID = ["pick up metal pot", "pick up thermometer", "move cup containing orange juice to stove", "open cupboard",
         "teleport to hallway", "look at agent", "connect battery anode to red wire terminal 1", "look around"]


# ------------------------------------------------------------------ Gate-1: target unseen, for every verb

def test_target_unseen_drops_what_is_in_a_closed_container():
    assert unseen_words("pick up metal pot", KITCHEN, "") == ["metal", "pot"]
    assert unseen_words("move cup containing orange juice to stove", KITCHEN, "") == []  # in the open fridge
    assert unseen_words("teleport to hallway", KITCHEN, "") == [] and unseen_words("look at agent", KITCHEN, "") == []
    assert unseen_words("connect battery anode to red wire terminal 1", KITCHEN, "") == ["battery", "red", "wire"]
    # an object the game names by where it is: in the inventory (or this room) it is in view under any name (the
    # mattress picked up is "cloth sittable in inventory"); elsewhere, or the other object of the action, is not
    bedroom = "This room is called the bedroom. In it, you see: a bed. On the bed is: a mattress. a desk."
    assert unseen_words("move cloth sittable in inventory to hallway", KITCHEN, "a mattress") == []
    # an action remembered from another episode says where its object was then, not where it is now
    assert unseen_words("move cloth sittable in inventory to hallway", KITCHEN, "a mattress", located=False) == \
        ["cloth", "sittable"]
    assert unseen_words("move cloth sittable in inventory to desk", bedroom, "a mattress") == []
    assert unseen_words("move cloth sittable in bedroom to desk", bedroom, "") == []
    assert unseen_words("move cloth sittable in workshop to desk", bedroom, "") == ["cloth", "sittable"]
    assert unseen_words("move desk to metal pot in inventory", bedroom, "") == []
    assert unseen_words("move metal pot to desk in inventory", bedroom, "") == ["metal", "pot"]
    assert unseen_words("move object to stove", KITCHEN, "") == []  # the game's category name for a thing in scope
    # an object the game names by another of its names (the game's object table): the mattress on the bed is the
    # game's `cloth sittable`; a name that shows only inside another object's name ("a flower pot") does not count
    names = {"cloth sittable": ["sittable", "cloth sittable", "mattress"], "metal pot": ["metal pot", "pot"],
             "desk": ["desk"]}
    missing = unseen_words("move cloth sittable to desk", bedroom, "")
    assert missing == ["cloth", "sittable"] and seen_by_another_name("move cloth sittable to desk", missing, bedroom,
                                                                     "", names) == []
    potted = bedroom + " a flower pot."
    missing = unseen_words("move metal pot to desk", potted, "")
    assert missing == ["metal"] and seen_by_another_name("move metal pot to desk", missing, potted, "", names) == ["metal"]
    # a name several objects share shows none of them: milk in the closed fridge is a "substance", and so is the air
    # every room shows ("a substance called air")
    fridge = KITCHEN + "\n\ta substance called air"
    shared = {**names, "milk": ["milk", "substance", "liquid"], "air": ["air", "substance", "gas"]}
    missing = unseen_words("pour milk into metal pot", fridge, "")
    assert "milk" in missing and "milk" in seen_by_another_name("pour milk into metal pot", missing, fridge, "", shared)
    sitting = GateContext(valid=["move bed to cloth sittable"], look=bedroom, object_names=lambda: names)
    assert Gate1(SRMConfig()).check("move bed to cloth sittable", "swift", sitting).decision == "ACCEPT"
    assert Gate1(SRMConfig()).check("move bed to cloth sittable", "swift", GateContext(
        valid=["move bed to cloth sittable"], look=bedroom)).reason == "TARGET_NOT_VISIBLE"  # without the game's names
    ctx = GateContext(valid=VALID, look=KITCHEN, inventory="In your inventory, you see:\n\tan orange")
    d = Gate1(SRMConfig()).check("pick up metal pot", "swift", ctx)
    assert (d.decision, d.reason) == (DROP, "TARGET_NOT_VISIBLE") and "metal pot" in d.detail
    assert Gate1(SRMConfig()).check("open cupboard", "swift", ctx).decision == "ACCEPT"
    # the earlier rule checked visibility for `focus on` only: the pot went to the game ("No known action ...")
    old = Gate1(SRMConfig(gate1_target_unseen=False)).check("pick up metal pot", "swift", ctx)
    assert old.decision == "ACCEPT"
    # with no room text at all nothing is judged unseen (a state Gate-1 cannot see)
    assert Gate1(SRMConfig()).check("pick up metal pot", "swift", GateContext(valid=VALID)).decision == "ACCEPT"


# ------------------------------------------------------------------ the avoid list and "no focus": the Critic's only

def _gate_ctx_of(avoid_binds: str):
    from agent_core.control.srm_hooks import SRMHooks
    from agent_core.episode import AgentState

    from agent_core.swift.format import SwiftState

    st = AgentState()
    st.swift_state = SwiftState(task_description="Your task is to boil water.", score=0.0, look=KITCHEN, inventory="")
    st.avoid, st.avoid_until = ["look at sink"], 10
    fake = SimpleNamespace(state=st, cfg=apply_overrides(preset("srm"), {"srm.avoid_binds": avoid_binds}),
                           _focus_limit=None, _focus_unrewarded_gold=0, embedder=None)
    return SRMHooks._gate_ctx(fake, ["look at sink", "focus on water"], 3)


def test_the_avoid_list_and_no_focus_bind_only_the_critic():
    ctx = _gate_ctx_of("critic")
    assert list(ctx.avoid) == [] and ctx.no_focus is False
    assert Gate1().check("look at sink", "swift", ctx).decision == "ACCEPT"
    # the earlier rule: Gate-1 dropped Swift's and Sage's actions on the list, and every focus, for 5 steps
    old = _gate_ctx_of("all")
    assert list(old.avoid) == ["look at sink"] and old.no_focus is True
    assert Gate1().check("look at sink", "swift", old).reason == "STAGNATION_AVOID"


# ------------------------------------------------------------------ the stagnation detector

def _rec(step: int, action: str, obs: str = "Nothing happens.", reward: float = 0.0):
    from agent_core.trace import StepRecord

    return StepRecord(step=step, action=action, system="swift", observation=obs, look=KITCHEN, inventory="",
                      score=0.0, reward=reward, moves=step, done=False, failed=False, room="kitchen",
                      action_valid=True)


def test_observation_verbs_are_never_avoided():
    recs = [_rec(i, "look at sink", "a sink, which is turned off.") for i in range(1, 6)]
    rep = detect(recs, SRMConfig())
    assert rep is not None and "REPEAT_ACTION_2_NO_EFFECT" in rep.modes
    assert rep.actions_to_avoid == []  # looking again is how an agent checks
    old = detect(recs, SRMConfig(never_avoid_verbs=()))
    assert old.actions_to_avoid == ["look at sink"]


def test_the_window_restarts_after_a_reward_or_a_report():
    recs = [_rec(i, "open stove", "The stove is already open.") for i in range(1, 9)]
    recs[3] = dataclasses.replace(recs[3], reward=5.0)  # progress at step 4: steps 1-4 no longer count
    assert detect(recs[:8], SRMConfig()) is None  # only 4 steps since the reward
    assert detect(recs[:8], SRMConfig(stagnation_restart=False)) is not None  # the earlier rule re-fired on them
    more = recs + [_rec(i, "open stove", "The stove is already open.") for i in range(9, 10)]
    assert detect(more, SRMConfig()) is not None  # 5 idle steps after the reward: a report
    # after a report at step 9, evidence up to step 9 is not counted again
    later = more + [_rec(i, "open stove", "The stove is already open.") for i in range(10, 14)]
    assert detect(later, SRMConfig(), last_report_step=9) is None
    assert detect(later, SRMConfig(stagnation_restart=False), last_report_step=9) is not None


# ------------------------------------------------------------------ AMM: T1 and the memory text

class _Swift:
    name = "fake"

    def __init__(self, retry: SwiftProposal):
        self.retry = retry

    def propose(self, state, valid, memory=""):
        return self.retry


def _turn(cfg, retry: SwiftProposal | None = None):
    from agent_core.episode import AgentState

    from agent_core.swift.format import SwiftState

    st = AgentState()
    st.swift_state = SwiftState(task_description="Your task is to boil water.", score=0.0, look=KITCHEN, inventory="")
    amm = SimpleNamespace(t1=lambda *a, **k: MemoryRetrieval(trigger="T1", why="", query="", injected_into="swift",
                                                               injected_text="; Memory: [x]"))
    return SimpleNamespace(cfg=cfg, state=st, amm=amm, swift=_Swift(retry), parts=SimpleNamespace(
        loop_guard_streak=None), last=SimpleNamespace(room="kitchen"))


def test_t1_fires_only_when_the_invalid_rule_does():
    valid = ["pick up thermometer", "open cupboard"]
    # Swift's unconstrained guess is not a valid action, but it rates a valid action well: no invalid trigger
    sure = SwiftProposal(top1="pick up the thermometer please", candidates=[],
                         valid_ranked=[("pick up thermometer", -0.2)], action="pick up thermometer")
    cfg = preset("full")
    assert cfg.controller.invalid_rule == "ranked"
    assert SwiftTurn._t1_fires(_turn(cfg), sure, valid) is False
    old = apply_overrides(cfg, {"amm.t1_trigger": "top1"})
    assert SwiftTurn._t1_fires(_turn(old), sure, valid) is True  # the earlier rule fired on most steps
    unsure = dataclasses.replace(sure, valid_ranked=[("pick up thermometer", -3.0)])
    assert SwiftTurn._t1_fires(_turn(cfg), unsure, valid) is True


def test_a_retry_never_replaces_a_ranked_action_outside_swifts_top_k():
    valid = ["a1", "a2", "a3", "far"]
    prop = SwiftProposal(top1="nonsense", candidates=[], action="a1",
                         valid_ranked=[("a1", -2.0), ("a2", -2.1), ("a3", -2.2), ("far", -9.0)])
    retry = SwiftProposal(top1="far", candidates=[], action="far", valid_ranked=[("far", -0.1)])
    cfg = apply_overrides(preset("full"), {"amm.t1_retry_top_k": 3})
    w = StepDraft(step=1)
    assert SwiftTurn._t1(_turn(cfg, retry), w, valid, prop) is prop  # memory may not bring in what Swift ranks low
    assert w.decisions[-1].outside_top_k == 3 and "Swift's ranked action stands" in w.retrievals[-1].outcome
    old = apply_overrides(cfg, {"amm.t1_retry_top_k": 0})
    assert SwiftTurn._t1(_turn(old, retry), StepDraft(step=1), valid, prop) is retry
    inside = dataclasses.replace(retry, top1="a3", action="a3")
    assert SwiftTurn._t1(_turn(cfg, inside), StepDraft(step=1), valid, prop) is inside


def _memory(cfg: AMMConfig, variation: int = 7):
    from agent_core.amm import EpisodicMemory

    m = EpisodicMemory.__new__(EpisodicMemory)
    m.c, m.variation = cfg, variation
    return m


def test_swift_memory_names_only_objects_in_view_and_sage_sees_other_variations():
    cand = SimpleNamespace(tag="success", type="observation", description="", id="m1", rank=1)
    other = {"action": "focus on liquid unknown substance j", "result": "You focus on the unknown substance J.",
             "reward": 50.0, "score_before": 0, "score_after": 50, "room": "kitchen", "variation": 3}
    here = {**other, "action": "pick up thermometer", "result": "You move the thermometer to the inventory.",
            "variation": 7}
    m = _memory(AMMConfig())
    assert "-->" not in m._swift_line(cand, here)  # the old observation is left out
    from agent_core.actions import unseen_words as unseen

    assert unseen(other["action"], KITCHEN, "") and not unseen(here["action"], KITCHEN, "")
    old = _memory(AMMConfig(swift_memory_objects="any"))
    assert "unknown substance J" in old._swift_line(cand, other)
    assert "[success, another variation]" in m._sage_line(cand, other)
    assert "another variation" not in m._sage_line(cand, here)
    assert "another variation" not in _memory(AMMConfig(mark_other_variations=False))._sage_line(cand, other)


# ------------------------------------------------------------------ the Critic's list

def test_the_critics_list_is_ranked_not_in_game_order():
    valid = ([f"dunk cup containing orange juice into {x}" for x in ("bowl", "chair", "counter", "sink", "table")]
             + ["pick up metal pot", "activate stove", "open cupboard", "look at stove", "focus on water"])
    rep = StagnationReport(modes=["SAME_OBS_3"], counts={}, window=5, last_action="look at stove",
                           observation_signature="", actions_to_avoid=["look at stove"], constraints=[],
                           explanation=[])
    out = rank_valid(valid, rep, "Your task is to boil water.", 40, swift_ranked=["open cupboard"],
                     plan="heat the pot on the stove", look=KITCHEN)
    assert out[0] == "open cupboard"  # Swift's own ranking first
    assert out.index("activate stove") < out.index("pick up metal pot")  # in view before out of sight
    assert sum(a.startswith("dunk cup") for a in out) == 2  # five near-identical lines say one thing
    assert "look at stove" not in out and "focus on water" not in out
    cfg = apply_overrides(preset("srm"), {"srm.critic_valid_order": "game"})
    assert cfg.srm.critic_valid_order == "game"


# ------------------------------------------------------------------ Sage chooses by meaning

PLAN = "Q1: water.\nQ2: a pot.\nQ3: boil water.\nQ4: fill the pot with water at the sink.\nQ5: no."
KITCHEN_VALID = ["move metal pot to sink", "activate sink", "go to bathroom", "pick up metal pot", "look at stove",
                 "open cupboard", "activate stove", "eat apple", "pick up thermometer", "go to hallway",
                 "close fridge", "look at sink"]  # 12: sage.choices, so every order offers them all


def _plan_scorer(turn: str, option: str) -> float:
    """A stand-in for a model: options sharing words with 'fill the pot with water at the sink' score higher (on the
    prompt without the state, prompts/alone.txt, only the length counts)."""
    if "Write one command" in turn:
        return -0.01 * len(option)
    want = {"fill", "pot", "water", "sink"}
    words = set(option.replace("metal ", "").split())
    return len(want & words) - 0.01 * len(option)


def _ctx(valid, ranked=()):
    return SageContext(task="Your task is to boil water.", look=KITCHEN, inventory="", score=0, time=3, history=[],
                       valid=list(valid), swift_ranked=list(ranked))


def test_the_pick_is_the_best_scored_option_whatever_the_order():
    llm = ScriptedBackend(lambda t: PLAN, scorer=_plan_scorer)
    sage = Sage(llm)
    picks = set()
    for seed in range(5):
        valid = KITCHEN_VALID[:]
        random.Random(seed).shuffle(valid)
        res = sage.think(_ctx(valid, valid[:8]))
        picks.add(tuple(res.actions))
        assert res.picked_how == ["score"] and res.scores[0][0] == res.actions[0]
        assert [s for _o, s in res.scores] == sorted((s for _o, s in res.scores), reverse=True)
        assert res.llm_calls[-1].purpose == "ground" and res.llm_calls[-1].output == res.actions[0]
    assert picks == {("move metal pot to sink",)}
    # the earlier rule: the model writes a number, and "11" picks whatever stands 11th
    gen = Sage(ScriptedBackend(lambda t: PLAN if "Answer the five questions" in t else "11"),
               dataclasses.replace(Sage(llm).cfg, pick="generate"))
    firsts = {tuple(gen.think(_ctx(v, v[:8])).actions) for v in
              (random.Random(s).sample(KITCHEN_VALID, len(KITCHEN_VALID)) for s in range(5))}
    assert len(firsts) > 1


def test_a_failed_call_records_its_kind_for_plans_and_picks():
    """The step record keeps what kind of failure replaced a reply (the report counts timeouts by it, the Run page
    tells a Pause from a failure by it), whichever of Sage's calls failed and however the backend broke."""
    from agent_core.llm import LLMTimeoutError

    def broken(e: Exception):
        def scorer(_turn: str, _option: str) -> float:
            raise e
        return scorer

    timeout = LLMTimeoutError("embedded", "qwen did not score 12 options within 120 s")
    plan_fails = Sage(ScriptedBackend([timeout], scorer=_plan_scorer)).think(_ctx(KITCHEN_VALID, KITCHEN_VALID[:8]))
    assert [(c.purpose, c.error_kind) for c in plan_fails.llm_calls] == [("plan", "timeout")] and not plan_fails.actions
    pick_fails = Sage(ScriptedBackend(lambda t: PLAN, scorer=broken(RuntimeError("llama_decode returned -3"))))
    res = pick_fails.think(_ctx(KITCHEN_VALID, KITCHEN_VALID[:8]))
    assert [(c.purpose, c.error_kind) for c in res.llm_calls] == [("plan", None), ("ground", "crash")]
    assert res.llm_calls[-1].error == "RuntimeError in the scripted backend: llama_decode returned -3"


def test_the_pick_rule_decides_what_is_compared():
    """`sage.pick_rule`: the mean log-probability per token (default) or pmi, the summed log-probability after the
    plan less the option's log-probability as a command on its own (scored once per option and Sage). On a table
    where the long option is easy in itself, the two rules pick differently (on the real recorded inclined-plane
    list the 1.5B model's numbers make both pick the long one: docs/AGENT.md §3)."""
    long_, block = ("move inclined plane with a platinum surface to inclined plane with a aluminum surface",
                    "move block to inclined plane with a platinum surface")
    table = {(True, long_): -1.2, (False, long_): -1.5, (True, block): -2.0, (False, block): -9.0,
             (True, "go to hallway"): -3.0, (False, "go to hallway"): -6.0}

    def scorer(turn: str, option: str) -> float:  # summed log-probabilities; the scripted backend counts 1 token
        return table[("Write one command" not in turn, option)]

    valid = [long_, block, "go to hallway"]
    by_rule = {}
    for rule in ("mean", "pmi"):
        llm = ScriptedBackend(lambda t: PLAN, scorer=scorer)
        sage = Sage(llm, dataclasses.replace(Sage(llm).cfg, pick_rule=rule))
        res = sage.think(_ctx(valid, valid))
        by_rule[rule] = res.actions[0]
        assert res.score_rule == rule
        if rule == "pmi":
            assert res.scores[0] == (block, 7.0) and res.score_parts[block] == (-2.0, -9.0)
            n_alone = sum("Write one command" in c for c in llm.calls)
            sage.think(_ctx(valid, valid))  # the same options again: nothing is scored alone a second time
            assert sum("Write one command" in c for c in llm.calls) == n_alone == 1
    assert by_rule == {"mean": long_, "pmi": block}


def test_a_backend_that_cannot_score_falls_back_to_generation_with_a_note():
    llm = ScriptedBackend(lambda t: PLAN if "Answer the five questions" in t else "1")
    res = Sage(llm).think(_ctx(KITCHEN_VALID, KITCHEN_VALID[:8]))
    assert res.actions and res.picked_how == ["number"] and not res.scores
    assert any("cannot score" in p for p in res.problems)


def test_the_focus_review_offers_every_target_the_task_names_and_scores_none_yet():
    focus = [f"focus on {x}" for x in ("air", "agent", "chair", "counter", "cupboard", "fridge", "sink", "stove",
                                       "table", "painting", "lighter", "stopwatch", "glass jar",
                                       "thermometer in kitchen")]
    ctx = SageContext(task="Your task is to measure the temperature with the thermometer.", look=KITCHEN,
                      inventory="", score=0, time=3, history=[], focus=focus)
    scored = Sage(ScriptedBackend([], scorer=lambda t, o: 1.0 if "thermometer" in o else 0.0)).review_focus(ctx)
    assert "focus on thermometer in kitchen" in scored.options  # 14th by Swift, still offered
    assert scored.actions == ["focus on thermometer in kitchen"] and scored.picked_how == ["score"]
    none = Sage(ScriptedBackend([], scorer=lambda t, o: 1.0 if o == "none of them yet" else 0.0)).review_focus(ctx)
    assert none.actions == [] and none.picked_how == ["none"]


@pytest.mark.model
def test_the_embedded_model_scores_the_same_whatever_the_order():
    from agent_core.llm.embedded import EmbeddedBackend

    llm = EmbeddedBackend("smollm2-135m", n_threads=2)
    sage = Sage(llm, dataclasses.replace(Sage(llm).cfg, pick="score"))
    first = None
    for seed in range(3):
        options = random.Random(seed).sample(KITCHEN_VALID, len(KITCHEN_VALID))  # the same options, shuffled
        ctx = _ctx(options, options[:8])
        call, ranked = sage._score("ground", sage.score_messages(ctx, PLAN, options), options)
        assert not call.error and len(ranked) == len(options)
        if first is None:
            first = dict(ranked)
        else:
            assert set(dict(ranked)) == set(first)
            assert all(abs(dict(ranked)[o] - first[o]) < 1e-3 for o in first)  # same prompt, same scores
        assert ranked[0][0] == sorted(first, key=lambda o: (-first[o], o))[0]  # the same pick
    # the shared prompt came from llama.cpp's cache (all but its last token); the options were read in one batch,
    # one sequence each over the cached prompt, and score as each read alone does (to llama.cpp's batch rounding)
    assert call.prompt_tokens - call.cached_tokens <= 1
    messages = sage.score_messages(ctx, PLAN, options)
    together = llm.score(messages, options)
    alone = [llm.score(messages, [o]).mean[0] for o in options]
    assert max(abs(a - b) for a, b in zip(together.mean, alone)) < 0.05  # per token
    assert together.scored_tokens == sum(together.tokens) + len(options)  # each option, plus the prompt's last token
    # the options alone (sage.pick_rule = pmi) are read in spare sequences beside the cached conversation: the
    # next scoring of the conversation reads nothing again, and they score as a plain scoring of that prompt does
    spare = llm.score_alone(sage.alone_template, options)
    again = llm.score(messages, options)
    assert again.prompt_tokens - again.cached_tokens <= 1
    assert max(abs(a - b) for a, b in zip(again.logprobs, together.logprobs)) < 1e-3
    direct = llm.score(sage.alone_template, options)
    # (to llama.cpp's batch rounding: SmolLM2's Q4_1 weights differ between batch shapes by up to ~0.1 per token with
    # AVX-512 kernels and ~0.12 with AVX2 ones; an option that saw the conversation's cells scores whole nats per
    # token away, as the conversation's own scores show)
    per_token = [abs(a - b) / n for a, b, n in zip(spare, direct.logprobs, direct.tokens)]
    assert max(per_token) < 0.25, (spare, direct.logprobs)
    seen = [abs(a - b) / n for a, b, n in zip(together.logprobs, direct.logprobs, direct.tokens)]
    assert min(seen) > 0.5, seen  # so the bound above tells a clean read from a contaminated one, option by option
    assert len(set(round(x, 3) for x in spare)) > 1  # a real model: the options differ in themselves


def test_the_accept_rule_decides_whether_sages_pick_replaces_swifts_action():
    """`sage.accept`: best (the best-scored option is always played), margin (only when it beats the runner-up by
    accept_margin), agree (only when Swift ranks it among its first accept_top_k). A deferred call keeps the scores
    and says why; no action, so Swift's stands."""
    valid = ["move block to table", "go to hallway", "pick up block", "look at table"]
    close = {"move block to table": -1.0, "pick up block": -1.1, "go to hallway": -3.0, "look at table": -4.0}
    clear = {**close, "pick up block": -2.0}
    swift = ["go to hallway", "look at table", "pick up block", "move block to table"]

    def think(table, **cfg):
        llm = ScriptedBackend(lambda t: PLAN, scorer=lambda turn, option: table[option])
        return Sage(llm, dataclasses.replace(Sage(llm).cfg, **cfg)).think(_ctx(valid, swift))

    assert think(close).actions == ["move block to table"] and not think(close).deferred
    res = think(close, accept="margin", accept_margin=0.2)
    assert res.actions == [] and "by only 0.10" in res.deferred and res.scores[0][0] == "move block to table"
    assert think(clear, accept="margin", accept_margin=0.2).actions == ["move block to table"]
    res = think(clear, accept="agree", accept_top_k=3)
    assert res.actions == [] and "first 3 valid actions" in res.deferred
    assert think(clear, accept="agree", accept_top_k=4).actions == ["move block to table"]
