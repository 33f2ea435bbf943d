"""The SwiftSage switching rules against the real ScienceWorld, with a scripted Swift and LLM."""
from __future__ import annotations

import pytest

from agent_core.config import preset
from agent_core.controller import Agent, ScriptedSwift
from agent_core.env import catalog
from agent_core.llm import LLMConnectionError, ScriptedBackend
from agent_core.trace import read_episode

PLAN = """**Q1:** The water is in the sink of the kitchen; a metal pot is in the cupboard.
Q2. The pot and the water are not collected yet.
3) Fill the pot with water, put it on the stove, turn the stove on.
Q4 - Nothing is done yet; focus on getting to the kitchen.
Q5: No mistake so far."""


def _agent(tmp_path, swift_actions, llm_script, sw_env, grounding="numbered"):
    cfg = preset("baseline")
    cfg.sage.grounding = grounding
    cfg.sage.max_picks = 5  # these tests follow a buffer of several actions through the steps
    return Agent(cfg, ScriptedSwift(swift_actions), ScriptedBackend(llm_script), env=sw_env, runs_dir=tmp_path)


def _start(agent, task="boil"):
    agent.start(task, catalog().get(task).test[0], split="test")


@pytest.mark.jvm
@pytest.mark.model
def test_invalid_trigger_sage_buffer_and_return_to_swift(tmp_path, sw_env):
    agent = _agent(tmp_path, ["fly to the moon", "look around", "look around"],
                   [PLAN, "1. teleport to kitchen\n2. `look at stove`\n"], sw_env)
    _start(agent)
    r1 = agent.step()
    assert r1.trigger.name == "invalid" and r1.trigger.evidence["swift_top1"] == "fly to the moon"
    assert r1.system == "sage" and r1.action == "teleport to kitchen" and r1.room == "kitchen"
    assert r1.plan["Q1"].startswith("The water is in the sink") and set(r1.plan) == {"Q1", "Q2", "Q3", "Q4", "Q5"}
    assert r1.buffer_before == ["teleport to kitchen", "look at stove"] and r1.buffer_after == ["look at stove"]
    assert [c.purpose for c in r1.llm_calls] == ["plan", "ground"]
    assert "Task: Your task is to boil" in r1.llm_calls[0].prompt
    assert "turn the stove on" in r1.llm_calls[1].prompt  # the plan reaches the grounding prompt
    assert r1.swift_candidates[0].action == "fly to the moon" and r1.swift_candidates[0].valid is False
    r2 = agent.step()
    assert r2.system == "sage" and r2.action == "look at stove" and r2.trigger is None and r2.buffer_after == []
    r3 = agent.step()
    assert r3.system == "swift" and r3.trigger.name == "buffer_empty" and r3.action == "look around"
    ep = read_episode(agent.trace_path)
    assert [s.system for s in ep.steps] == ["sage", "sage", "swift"]
    assert ep.steps[0].trigger.evidence["swift_top1"] == "fly to the moon"


@pytest.mark.jvm
@pytest.mark.model
def test_critical_trigger_on_focus(tmp_path, sw_env):
    agent = _agent(tmp_path, lambda s, v: next(a for a in v if a.startswith("focus on")),
                   [PLAN, "look around"], sw_env)
    agent.cfg.controller.critical_review = "unsure"  # on (off by default); no margin: the focus is reviewed
    agent.cfg.controller.focus_review = "replan"  # SwiftSage's review (the "choose" review: test_sage_choices.py)
    _start(agent)
    r = agent.step()
    assert r.trigger.name == "critical" and r.trigger.evidence["swift_action"].startswith("focus on")
    assert r.system == "sage" and r.action == "look around"


@pytest.mark.jvm
@pytest.mark.model
def test_stuck_trigger_after_five_zero_rewards(tmp_path, sw_env):
    agent = _agent(tmp_path, ["look around"] * 7, [PLAN, "look around"], sw_env)
    _start(agent)
    recs = [agent.step() for _ in range(6)]
    assert all(r.trigger is None and r.system == "swift" for r in recs[:5])
    assert recs[5].trigger.name == "stuck" and recs[5].trigger.evidence["rewards"] == [0, 0, 0, 0, 0]
    assert "the last 5 steps sum to 0" in recs[5].trigger.rule


@pytest.mark.jvm
@pytest.mark.model
def test_unexpected_trigger_on_failure_observation(tmp_path, sw_env):
    agent = _agent(tmp_path, ["teleport to kitchen", "use thermometer on kitchen", "look around"],
                   [PLAN, "look at stove"], sw_env)
    _start(agent)
    a = agent.step()
    b = agent.step()
    assert a.trigger is None and b.trigger is None and "doesn't appear" in b.observation
    c = agent.step()
    assert c.trigger.name == "unexpected" and "doesn't" in c.trigger.evidence["markers"]
    assert c.system == "sage" and c.action == "look at stove"


@pytest.mark.jvm
@pytest.mark.model
def test_buffer_failures_return_to_swift_and_prose_is_mapped(tmp_path, sw_env):
    # free-form grounding (sage.grounding="free", the path for a large model writing its own commands)
    agent = _agent(tmp_path, ["fly away", "look around", "look around"],
                   [PLAN, "- sing a song to the stars\n- dance with the moon\n- juggle three planets\n"], sw_env,
                   grounding="free")
    _start(agent)
    r = agent.step()
    assert [m.method for m in r.mappings] == ["unmapped"] * 3
    assert r.system == "swift" and any("failed in a row" in n for n in r.notes)
    # prose is mapped to the nearest valid action by sentence-embedding similarity
    agent2 = _agent(tmp_path, ["fly away"], [PLAN, "Teleport to the kitchen room."], sw_env, grounding="free")
    _start(agent2)
    r2 = agent2.step()
    assert r2.system == "sage" and r2.action == "teleport to kitchen"
    assert r2.mappings[0].method in ("normalized", "similarity")


@pytest.mark.jvm
def test_llm_failure_is_recorded_and_swift_acts(tmp_path, sw_env):
    err = LLMConnectionError("openai", "cannot reach the LLM server at http://127.0.0.1:9/v1")
    agent = _agent(tmp_path, ["fly to the moon", "look around"], [err], sw_env)
    _start(agent)
    r = agent.step()
    assert r.trigger.name == "invalid" and r.system == "swift"
    assert r.llm_calls[0].error and "cannot reach" in r.llm_calls[0].error
    assert any("Sage failed" in n for n in r.notes)
    back = read_episode(agent.trace_path).steps[0].llm_calls[0]
    assert back.error and back.error_kind == "connection" and back.failure() == "connection"


@pytest.mark.jvm
def test_episode_summary_and_step_limit(tmp_path, sw_env):
    cfg = preset("baseline")
    cfg.env.step_limit = 4
    sw_env.cfg.step_limit = 4
    try:
        agent = Agent(cfg, ScriptedSwift(["teleport to kitchen", "teleport to hallway"] * 3), ScriptedBackend([]),
                      env=sw_env, runs_dir=tmp_path)
        _start(agent)
        summary = agent.run()
        assert summary.steps == 4 and summary.reason == "step_limit"
        ep = read_episode(agent.trace_path)
        assert ep.summary.steps == 4 and len(ep.steps) == 4 and ep.steps[-1].done
        with pytest.raises(RuntimeError, match="over"):
            agent.step()
    finally:
        sw_env.cfg.step_limit = 100


def test_invalid_rule_top1_versus_ranked():
    """`top1` (SwiftSage) fires when the unconstrained guess is not valid even though Swift's best valid action
    is right; `ranked` fires only when Swift rates no valid action at least `invalid_min_score` per token."""
    from agent_core.config import ControllerConfig
    from agent_core.controller import invalid_fires
    from agent_core.swift.model import SwiftProposal

    valid = {"focus on finger painting", "look around"}
    right = SwiftProposal(top1="focus on painting", candidates=[("focus on painting", -0.2)],
                          valid_ranked=[("focus on finger painting", -0.4)], action="focus on finger painting")
    lost = SwiftProposal(top1="fly away", candidates=[("fly away", -0.3)], valid_ranked=[("look around", -2.7)],
                         action="look around")
    top1, ranked = ControllerConfig(invalid_rule="top1"), ControllerConfig(invalid_rule="ranked", invalid_min_score=-1.5)
    assert invalid_fires(right, valid, top1) and not invalid_fires(right, valid, ranked)
    assert invalid_fires(lost, valid, top1) and invalid_fires(lost, valid, ranked)
    assert invalid_fires(SwiftProposal(top1="fly", candidates=[]), valid, ranked)  # nothing valid at all


def test_unknown_rule_names_are_refused_clearly(tmp_path, sw_env):
    for field, value in (("invalid_rule", "top2"), ("critical_review", "sometimes"), ("focus_review", "guess")):
        cfg = preset("baseline")
        setattr(cfg.controller, field, value)
        with pytest.raises(ValueError, match=f"controller.{field}: '{value}' is not one of"):
            Agent(cfg, ScriptedSwift([]), ScriptedBackend([]), env=sw_env, runs_dir=tmp_path)
    cfg = preset("baseline")
    cfg.sage.grounding = "telepathy"
    with pytest.raises(ValueError, match="sage.grounding: 'telepathy' is not one of numbered, free"):
        Agent(cfg, ScriptedSwift([]), ScriptedBackend([]), env=sw_env, runs_dir=tmp_path)


def _pick_first(prompt: str) -> str:
    return PLAN if "Answer the five questions" in prompt else "1"


@pytest.mark.jvm
@pytest.mark.model
def test_swift_is_forced_after_two_sage_calls_in_a_row(tmp_path, sw_env):
    """controller.sage_streak_limit (SwiftSage's code): Swift's guess is never valid, so every step would call
    Sage; after 2 calls with no step of Swift's own between them, Swift acts once and the count starts again."""
    agent = _agent(tmp_path, lambda s, v: "fly to the moon", _pick_first, sw_env)
    agent.cfg.sage.max_picks = 1
    _start(agent)
    recs = [agent.step() for _ in range(6)]
    called = [any(c.purpose == "plan" for c in r.llm_calls) for r in recs]
    assert called == [True, True, False, True, True, False]
    forced = recs[2]
    assert forced.system == "swift" and forced.trigger.name == "swift_forced" and not forced.llm_calls
    assert forced.trigger.evidence["set_aside"][0] == "invalid" and forced.trigger.evidence["sage_calls_in_a_row"] == 2
    assert "2 Sage calls in a row" in " ".join(forced.notes)
    # the switch is in the trace as it was decided, for replays and the pages
    assert read_episode(agent.trace_path).steps[2].trigger.name == "swift_forced"


@pytest.mark.jvm
@pytest.mark.model
def test_without_the_streak_limit_sage_is_called_every_step(tmp_path, sw_env):
    agent = _agent(tmp_path, lambda s, v: "fly to the moon", _pick_first, sw_env)
    agent.cfg.sage.max_picks = 1
    agent.cfg.controller.sage_streak_limit = 0
    _start(agent)
    recs = [agent.step() for _ in range(4)]
    assert all(any(c.purpose == "plan" for c in r.llm_calls) for r in recs)
    assert not any(r.trigger.name == "swift_forced" for r in recs)


@pytest.mark.jvm
@pytest.mark.model
def test_the_sage_streak_survives_a_fork(tmp_path, sw_env):
    """The count is rebuilt from the recorded steps: a fork after two Sage calls in a row lets Swift act first."""
    agent = _agent(tmp_path, lambda s, v: "fly to the moon", _pick_first, sw_env)
    agent.cfg.sage.max_picks = 1
    _start(agent)
    for _ in range(2):
        agent.step()
    agent.finish("stopped")
    parent = read_episode(agent.trace_path)
    agent.close()
    fork = _agent(tmp_path, lambda s, v: "fly to the moon", _pick_first, None)
    fork.cfg.sage.max_picks = 1
    fork.fork(parent, 2)
    assert fork.state.sage_streak == 2
    r = fork.step()
    assert r.trigger.name == "swift_forced" and not r.llm_calls
    fork.close()


@pytest.mark.jvm
@pytest.mark.model
def test_a_forced_swift_does_not_play_a_focus_it_is_unsure_of(tmp_path, sw_env):
    """A critical focus set aside by the streak rule is nobody's to review: Swift's best other action is taken."""
    def swift(state, valid):
        if len(state.history) < 2:
            return "fly to the moon"  # invalid: Sage twice
        return next(a for a in valid if a.startswith("focus on"))

    agent = _agent(tmp_path, swift, _pick_first, sw_env)
    agent.cfg.sage.max_picks = 1
    agent.cfg.controller.critical_review = "always"  # the scripted Swift has no margin: every focus is critical
    _start(agent)
    recs = [agent.step() for _ in range(3)]
    assert [r.trigger.name for r in recs[:2]] == ["invalid", "invalid"]
    r = recs[2]
    assert r.trigger.name == "swift_forced" and "critical" in r.trigger.evidence["set_aside"]
    assert not r.action.startswith("focus on") and "best other action" in " ".join(r.notes)
