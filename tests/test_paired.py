"""The paired comparison (agent_core/evaluate/paired.py) on synthetic episodes with known answers."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent_core.decisions import Safeguard, T1Retry
from agent_core.evaluate.paired import attribute, compare, first_divergence, t_interval
from agent_core.evaluate.report import paired_markdown
from agent_core.trace import Gate1Decision, LLMCall, StepRecord, Trigger


def _rec(step, action, system="swift", **kw):
    return StepRecord(step=step, action=action, system=system, observation=f"you did {action}", look="", inventory="",
                      score=0.0, reward=0.0, moves=step, done=False, failed=False, room="kitchen", **kw)


def test_the_interval_has_the_known_answer():
    iv = t_interval([10, 0, -5, 20, 5])
    # mean 6, sd sqrt(370 / 4) = 9.6177, t(0.975, 4) = 2.7764: half-width 11.942
    assert (iv.n, iv.mean, iv.sd) == (5, 6.0, pytest.approx(9.6177, abs=1e-4))
    assert iv.low == pytest.approx(-5.942, abs=1e-3) and iv.high == pytest.approx(17.942, abs=1e-3)
    assert not iv.excludes_zero and t_interval([3, 4, 5, 4]).excludes_zero
    assert t_interval([]).n == 0 and t_interval([7]).mean == 7


def test_first_divergence_and_attribution():
    a = [_rec(1, "look around"), _rec(2, "open door")]
    assert first_divergence(a, a) is None
    assert first_divergence(a, a[:1]) == 2
    same = _rec(2, "Open  Door")
    same.observation = a[1].observation
    assert first_divergence(a, [a[0], same]) is None  # the one normalisation of action text
    ref = _rec(3, "pick up metal pot")
    drop = _rec(3, "open cupboard", gate1=[Gate1Decision(source="swift", proposed="pick up metal pot", decision="DROP",
                                                          result=None, reason="TARGET_NOT_VISIBLE")])
    why = attribute(drop, ref)
    assert (why.mechanism, why.kind) == ("gate1:TARGET_NOT_VISIBLE", "rule")
    sage = _rec(3, "activate stove", "sage", trigger=Trigger("stuck", "stuck: ...", {}),
                llm_calls=[LLMCall(purpose="plan", backend="scripted", model="m", prompt="")])
    assert attribute(sage, ref).mechanism == "trigger:stuck" and attribute(sage, ref).kind == "rule"
    both = _rec(3, "pick up thermometer", "sage", llm_calls=[LLMCall(purpose="plan", backend="s", model="m", prompt="")])
    ref_sage = _rec(3, "pick up metal pot", "sage", llm_calls=[LLMCall(purpose="plan", backend="s", model="m", prompt="")])
    assert attribute(both, ref_sage).mechanism == "sage_pick" and attribute(both, ref_sage).kind == "model"
    t1 = _rec(3, "pick up thermometer", decisions=[T1Retry(retry="pick up thermometer", replaced="x", valid=True)])
    assert attribute(t1, ref).mechanism == "memory_swift"
    guard = _rec(3, "look around", decisions=[Safeguard(proposed="fly")])
    assert attribute(guard, ref).kind == "rule"


def test_a_drop_of_what_the_game_rejected_in_the_reference_is_a_saved_step():
    """The reference played the dropped action at the same step (same past) and the game rejected it: the rule
    spared a wasted step and is not charged with what followed. A drop of an action the game took stays a rule's."""
    drop = _rec(3, "open cupboard", gate1=[Gate1Decision(source="swift", proposed="pick up metal pot", decision="DROP",
                                                          result=None, reason="TARGET_NOT_VISIBLE")])
    rejected = _rec(3, "pick up metal pot", action_valid=False)
    rejected.observation = "No known action matches that input."
    why = attribute(drop, rejected)
    assert (why.mechanism, why.kind) == ("gate1-saved:TARGET_NOT_VISIBLE", "saved") and "rejected" in why.detail
    assert attribute(drop, _rec(3, "pick up metal pot")).kind == "rule"  # the game took it in the reference
    assert attribute(drop, _rec(3, "look around", action_valid=False)).kind == "rule"  # another action was rejected
    taken = _rec(2, "pick up metal pot")
    taken.inventory = "In your inventory, you see:\n\ta metal pot"  # the game took it: something changed
    eps = {"b": [_rec(1, "look around"), rejected], "p": [_rec(1, "look around"), drop],
           "b2": [_rec(1, "look around"), taken], "p2": [_rec(1, "look around"), drop]}
    rows = [{"preset": pre, "task": t, "task_index": i, "variation": 0, "final": f, "trace": tr}
            for i, (t, pre, f, tr) in enumerate((("t1", "baseline", 30, "b"), ("t1", "full", 10, "p"),
                                                 ("t2", "baseline", 30, "b2"), ("t2", "full", 10, "p2")))]
    res = compare(rows, "full", read=lambda path: SimpleNamespace(steps=eps[path]))
    assert (res.rule_losses, res.saved_losses) == (1, 1)
    assert res.by_mechanism["gate1-saved:TARGET_NOT_VISIBLE"]["kind"] == "saved"  # its own row in the table
    assert res.by_mechanism["gate1:TARGET_NOT_VISIBLE"] == {"pairs": 1, "gained": 0, "lost": 1, "change": -20.0,
                                                             "kind": "rule"}
    text = "\n".join(paired_markdown({"paired": {"full": res.to_dict()}}))
    assert "| 2 | 1 | 1 |" in text and "gate1-saved:TARGET_NOT_VISIBLE (saved)" in text
    old = res.to_dict()
    del old["saved_losses"]  # a results.json written before saved steps were told apart
    assert "| 2 | 1 | — |" in "\n".join(paired_markdown({"paired": {"full": old}}))


def test_compare_pairs_by_task_and_variation_and_charges_each_divergence():
    taken = _rec(2, "pick up metal pot")
    taken.inventory = "In your inventory, you see:\n\ta metal pot"
    eps = {
        "b1": [_rec(1, "look around"), taken],
        "p1": [_rec(1, "look around"), _rec(2, "open cupboard", gate1=[Gate1Decision(
            source="swift", proposed="pick up metal pot", decision="DROP", result=None, reason="TARGET_NOT_VISIBLE")])],
        "b2": [_rec(1, "look around")], "p2": [_rec(1, "look around")],
        "b3": [_rec(1, "go to kitchen")],
        "p3": [_rec(1, "focus on water", "sage", llm_calls=[LLMCall(purpose="focus_review", backend="s", model="m",
                                                                    prompt="")])],
    }
    rows = []
    for i, (tag, final_b, final_p) in enumerate((("1", 30, 10), ("2", 50, 50), ("3", 0, 100))):
        rows.append({"preset": "baseline", "task": f"t{tag}", "task_index": i, "variation": 0, "final": final_b,
                     "trace": f"b{tag}"})
        rows.append({"preset": "srm", "task": f"t{tag}", "task_index": i, "variation": 0, "final": final_p,
                     "trace": f"p{tag}"})
    rows.append({"preset": "srm", "task": "t9", "task_index": 9, "variation": 0, "final": 100, "trace": "p1"})  # unpaired
    res = compare(rows, "srm", read=lambda path: SimpleNamespace(steps=eps[path]))
    assert res.interval.n == 3 and res.interval.mean == pytest.approx((-20 + 0 + 100) / 3, abs=1e-3)
    assert res.diverged == 2 and res.rule_losses == 1
    assert [(r.task, r.diverged_at, r.mechanism) for r in res.rows] == [
        ("t1", 2, "gate1:TARGET_NOT_VISIBLE"), ("t2", None, ""), ("t3", 1, "focus_review")]
    assert res.by_mechanism["gate1:TARGET_NOT_VISIBLE"] == {"pairs": 1, "gained": 0, "lost": 1, "change": -20.0,
                                                             "kind": "rule"}
    text = "\n".join(paired_markdown({"paired": {"srm": res.to_dict()}}))
    assert "| +SRM | 3 | +26.67 [" in text and "| +SRM | t1 | 0 | 30 | 10 | 2 | gate1:TARGET_NOT_VISIBLE (rule)" in text


def test_pairs_played_on_different_machines_are_counted_and_named():
    from agent_core.provenance import describe_machine, machine

    avx2 = {"cpu": "AMD EPYC", "isa": "avx2", "cores": 2}
    avx512 = {"cpu": "AMD EPYC", "isa": "avx512", "cores": 2}
    eps = {"b": [_rec(1, "look around")], "p": [_rec(1, "look around")]}
    rows = []
    for i, (mb, mp) in enumerate(((avx2, avx2), (avx2, avx512), ({}, avx512))):
        rows.append({"preset": "baseline", "task": f"t{i}", "task_index": i, "variation": 0, "final": 0, "trace": "b",
                     "machine": mb})
        rows.append({"preset": "srm", "task": f"t{i}", "task_index": i, "variation": 0, "final": 0, "trace": "p",
                     "machine": mp})
    res = compare(rows, "srm", read=lambda path: SimpleNamespace(steps=eps[path]))
    assert (res.across_machines, res.machine_unknown) == (1, 1)
    text = "\n".join(paired_markdown({"paired": {"srm": res.to_dict()}}))
    assert "**Pairs played on different machines:** +SRM 1." in text
    same = compare(rows[:2], "srm", read=lambda path: SimpleNamespace(steps=eps[path]))
    assert same.across_machines == 0 and "different machines" not in "\n".join(
        paired_markdown({"paired": {"srm": same.to_dict()}}))
    here = machine()  # this machine, as every new trace header records it
    assert here["cores"] >= 1 and here["isa"] and describe_machine(here).endswith(f"{here['cores']} cores)")
    assert describe_machine({}) == "not recorded"
    # a resume on another kind of machine is not exact (a strict one refuses): the core count alone does not matter
    from agent_core.episode.replay import provenance_changes

    code = {"commit": "a" * 40}
    assert provenance_changes(code, "h", code, "h", avx2, {**avx2, "cores": 8}) == []
    assert provenance_changes(code, "h", code, "h", {}, avx512) == []  # recorded before machines were
    assert provenance_changes(code, "h", code, "h", avx2, avx512) == [
        "machine: recorded on AMD EPYC (avx2, 2 cores), now AMD EPYC (avx512, 2 cores)"]


def test_plays_the_game_did_not_know_are_counted(tmp_path):
    """The report's "No known action" column: what Gate-1's target-unseen rule is measured by."""
    from agent_core.evaluate.metrics import UNKNOWN_ACTION, episode_metrics
    from agent_core.trace import Episode, EpisodeHeader

    steps = [_rec(1, "open metal pot"), _rec(2, "look around"), _rec(3, "pick up metal pot")]
    steps[0].observation = steps[2].observation = f"{UNKNOWN_ACTION}."
    ep = Episode(path=tmp_path / "x.jsonl", steps=steps, summary=None,
                 header=EpisodeHeader(task="boil", task_index=0, variation=21, split="test", task_description="",
                                      config={"preset": "swift"}, models={}))
    assert episode_metrics(ep)["activity"]["unknown_action_plays"] == 2


def test_sage_pick_positions_and_llm_timeouts_are_counted_and_reported(tmp_path):
    """The report's checks on Sage: where its picks stood in the list (a model answering by position piles them on
    one number) and how many LLM calls timed out, as the embedded and OpenAI backends word it."""
    from agent_core.decisions import SagePick
    from agent_core.evaluate.metrics import aggregate, episode_metrics, llm_failure
    from agent_core.evaluate.report import picks_markdown
    from agent_core.trace import Episode, EpisodeHeader

    call = lambda err=None, kind=None: LLMCall(purpose="plan", backend="embedded", model="m", prompt="",  # noqa: E731
                                               error=err, error_kind=kind)
    # the recorded kind decides; a trace from before the kind was recorded is read from the message's words
    assert llm_failure(call("[openai] no reply from http://127.0.0.1:8000/v1 within 30 s", "timeout")) == "timeout"
    assert llm_failure(call("[openai] the server waited for more than 5 s on its queue", "http")) == "other"
    assert llm_failure(call("[embedded] qwen did not finish within 120 s (prompt 900 tokens)")) == "timeout"
    assert llm_failure(call("[embedded] qwen was busy with other calls for more than 60 s")) == "timeout"
    assert llm_failure(call("[embedded] qwen did not score 12 options within 1e+06 s")) == "timeout"
    assert llm_failure(call("[openai] connection refused")) == "other"
    assert call("[openai] cancelled after 3.2 s").failure() == "cancelled" and call().failure() is None
    steps = [_rec(1, "a", "sage", decisions=[SagePick(action="a", option=11, of=12)], llm_calls=[call()]),
             _rec(2, "b", "sage", decisions=[SagePick(action="b", option=11, of=12)], llm_calls=[call()]),
             _rec(3, "c", "sage", decisions=[SagePick(action="c", option=2, of=9)], llm_calls=[call()]),
             _rec(4, "d", "sage", decisions=[SagePick(action="d", option=None, of=12)],
                  llm_calls=[call("[embedded] m did not finish within 120 s"), call("[embedded] RuntimeError")])]
    ep = Episode(path=tmp_path / "x.jsonl", steps=steps, summary=None,
                 header=EpisodeHeader(task="boil", task_index=0, variation=21, split="test", task_description="",
                                      config={"preset": "baseline"}, models={}))
    row = episode_metrics(ep)
    assert row["sage_picks"] == {"11": 2, "2": 1, "own": 1} and row["llm_failures"] == {"timeout": 1, "other": 1}
    totals = aggregate([row], {"boil": 60})["baseline"]["totals"]
    assert totals["sage_picks"] == {"11": 2, "2": 1, "own": 1} and totals["llm_failures"]["timeout"] == 1
    text = "\n".join(picks_markdown({"preset_order": ["baseline"], "presets": {"baseline": {"totals": totals}}}))
    assert "| 2 | 1 |\n| 11 | 2 |\n| a command of its own | 1 |" in text and "| **largest share** | 50% (position 11) |" in text
    from agent_core.evaluate.report import llm_calls_markdown

    assert llm_calls_markdown({"preset_order": ["baseline"], "presets": {"baseline": {"totals": totals}}}) == [
        "", "**LLM calls:** Baseline 5 (1 timed out, 1 failed otherwise)."]
    tie = {"preset_order": ["baseline", "full"], "presets": {"baseline": {"totals": {"sage_picks": {"own": 1, "3": 1}}},
                                                              "full": {"totals": {"sage_picks": {"own": 2, "1": 1}}}}}
    assert "| **largest share** | 50% (position 3) | 67% (its own commands) |" in "\n".join(picks_markdown(tie))


def test_compare_warns_when_two_episodes_come_from_different_code_or_machines():
    from views.compare import provenance_warning

    def ep(commit, machine):
        return SimpleNamespace(header=SimpleNamespace(code={"commit": commit}, run_id="r", config={"preset": "srm"},
                                                      machine=machine))

    avx2 = {"cpu": "AMD EPYC", "isa": "avx2", "cores": 2}
    assert provenance_warning(ep("a" * 40, avx2), ep("a" * 40, avx2)) is None
    machines = provenance_warning(ep("a" * 40, avx2), ep("a" * 40, {**avx2, "isa": "avx512"}))
    assert "different machines (A AMD EPYC (avx2, 2 cores), B AMD EPYC (avx512, 2 cores))" in machines
    assert "different code" not in machines
    assert "different code" in provenance_warning(ep("a" * 40, avx2), ep("b" * 40, {}))


def test_a_drop_of_what_changed_nothing_in_the_reference_is_a_saved_step():
    """test-conductivity: the reference focused on the substance a second time; the game took it and nothing changed
    (the same score, room text and inventory as the step before). Gate-1 dropped that focus (FOCUS_LIMIT), and the
    two then parted by Swift's own next choice in the same world: a saved step, not a loss charged to the rule. A
    drop of an action that changed the score, the room or the inventory in the reference stays the rule's, and so
    does one at the first step (nothing to compare with)."""
    def rec(step, action, score=60.0, reward=0.0, inventory="a substance", look="the workshop", **kw):
        r = _rec(step, action, **kw)
        r.score, r.reward, r.inventory, r.look = score, reward, inventory, look
        return r
    before = rec(11, "focus on unknown substance", reward=50.0)
    ref = rec(12, "focus on unknown substance")
    ref.observation = "You focus on the unknown substance U."
    drop = rec(12, "move unknown substance to blue box", score=-100.0, gate1=[Gate1Decision(
        source="sage", proposed="focus on unknown substance", decision="DROP", result=None, reason="FOCUS_LIMIT")])
    why = attribute(drop, ref, before)
    assert (why.mechanism, why.kind) == ("gate1-saved:FOCUS_LIMIT", "saved") and "nothing changed" in why.detail
    assert attribute(drop, ref).kind == "rule"  # no step before to compare with
    for changed in (rec(12, "focus on unknown substance", score=70.0, reward=10.0),
                    rec(12, "focus on unknown substance", inventory="nothing"),
                    rec(12, "focus on unknown substance", look="the hallway")):
        assert attribute(drop, changed, before).kind == "rule"
    eps = {"b": [before, ref], "p": [before, drop]}
    rows = [{"preset": pre, "task": "t", "task_index": 0, "variation": 0, "final": f, "trace": tr}
            for pre, f, tr in (("baseline", 100, "b"), ("srm", 0, "p"))]
    res = compare(rows, "srm", read=lambda path: SimpleNamespace(steps=eps[path]))
    assert (res.rule_losses, res.saved_losses, res.rows[0].diverged_at) == (0, 1, 2)


def test_an_evaluation_recorded_by_several_revisions_says_which_preset_ran_which():
    from agent_core.evaluate.report import mixed_code_line
    assert mixed_code_line({"code": {"f8a3405b85": 300}}) is None
    line = mixed_code_line({"code": {"aaa": 240, "bbb": 60},
                            "code_by_preset": {"baseline": {"aaa": 60}, "srm": {"aaa": 30, "bbb": 30}}})
    assert "more than one code revision" in line and "Baseline aaa (60)" in line and "+SRM aaa (30), bbb (30)" in line
