"""The step views (views/): self-reflection panels (Gate-1, the ambiguity menu, the stagnation report, the
Critic) and the mode timeline's lanes, rendered by the real Run page with Streamlit's AppTest from traces
written by hand with the real dataclasses and TraceWriter; and the pure helpers that read who acts next."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from agent_core.config import preset
from agent_core.trace import (CriticCall, EpisodeHeader, Gate1Decision, LLMCall, MenuChoice, StagnationReport,
                              StepRecord, TraceWriter, Trigger)
from views import next_hint, pending_actions, timeline_figure

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "0_Run.py")
TIMEOUT = 120
SRM = ["swift", "sage", "gate1", "stagnation", "critic", "loop_guard"]

REPAIR_WORDS = "only the letter case differed from the valid action 'open door to kitchen'"
DROP_WORDS = "no valid action is close to 'fly to the moon'"
STAG_WORDS = "the same observation came back 3 times in a row"
DIAGNOSIS = "The agent keeps looking around the kitchen instead of heating the water."


def _header(run_id: str, mechanisms: list[str], preset_name: str) -> EpisodeHeader:
    return EpisodeHeader(task="boil", task_index=0, variation=21, split="test",
                         task_description="Your task is to boil water.", config=preset(preset_name).to_dict(),
                         models={"swift": "scripted", "sage": "scripted:scripted"}, run_id=run_id,
                         initial_observation="You are in the hallway.", initial_look="This room is called the "
                         "hallway.", initial_inventory="In your inventory, you see: an orange",
                         mechanisms=mechanisms)


def _step(i: int, action: str, system: str = "swift", **kw) -> StepRecord:
    return StepRecord(step=i, action=action, system=system, observation=f"observation number {i}",
                      look=f"look {i}", inventory="an orange", score=0.0, reward=0.0, moves=i, done=False,
                      failed=False, room="kitchen", **kw)


def _srm_steps() -> list[StepRecord]:
    """One step per kind: ACCEPT; REPAIR + DROP; a menu answer; stagnation + a Critic call; a Critic action."""
    stagnation = StagnationReport(
        modes=["SAME_OBS_3", "REPEAT_ACTION_2_NO_EFFECT"], counts={"SAME_OBS_3": 3, "REPEAT_ACTION_2_NO_EFFECT": 2},
        window=6, last_action="look around", observation_signature="This room is called the kitchen.",
        actions_to_avoid=["look around"], constraints=["at most one move before acting on an object"],
        explanation=[STAG_WORDS, "'look around' was repeated 2 times with no effect"])
    critic = CriticCall(
        status="called", report_step=4, reason="A new stagnation report and budget left.",
        prompt="CRITIC PROMPT: you are the Critic...", output="DIAGNOSIS: ...\nCOURSE_CORRECTION: ...",
        diagnosis=DIAGNOSIS, course_correction="Turn on the stove, then wait.",
        actions=["activate stove", "fly to the moon"], admitted=["activate stove"], buffer_policy="replace",
        budget_used=2, budget=3, latency_s=1.5)
    return [
        _step(1, "look around", gate1=[Gate1Decision("swift", "look around", "ACCEPT", "look around",
                                                     "VALID", "look around", "a valid action as written")]),
        _step(2, "open door to kitchen", trigger=Trigger("invalid", "invalid: Swift's action is not valid"),
              gate1=[Gate1Decision("swift", "fly to the moon", "DROP", None, "NOT_IN_VALID_ACTIONS",
                                   "fly to the moon", DROP_WORDS),
                     Gate1Decision("swift", "open Door to kitchen", "REPAIR", "open door to kitchen", "REPAIR_CASE",
                                   "open door to kitchen", REPAIR_WORDS)]),
        _step(3, "0", menu=MenuChoice("pick up thermometer", ["thermometer on the table", "thermometer in the sink"],
                                      0, "gate1", "the plan needs the one on the table")),
        _step(4, "look around", gate1=[Gate1Decision("swift", "look around", "ACCEPT", "look around", "VALID"),
                                       Gate1Decision("critic", "activate stove", "ACCEPT", "activate stove", "VALID"),
                                       Gate1Decision("critic", "fly to the moon", "DROP", None,
                                                     "NOT_IN_VALID_ACTIONS", "fly to the moon", DROP_WORDS)],
              stagnation=stagnation, critic=critic, buffer_after=["activate stove"],
              buffer_after_sources=["critic"], mode_after="sage"),
        _step(5, "activate stove", system="critic",
              gate1=[Gate1Decision("critic", "activate stove", "ACCEPT", "activate stove", "VALID")]),
    ]


def _write(path: Path, header: EpisodeHeader, steps: list[StepRecord]) -> Path:
    with TraceWriter(path, header) as w:
        for s in steps:
            w.append(s)
    return path


def _open(monkeypatch, tmp_path: Path, trace: Path) -> AppTest:
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(trace.parent))
    monkeypatch.setenv("SWIFTSAGE_EXAMPLES_DIR", str(tmp_path / "no-examples"))
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.session_state["run_source"] = "Live run"  # not the first-visit example
    at.run()
    at.radio(key="run_source").set_value("Recorded episode").run()
    at.selectbox(key="run_trace").set_value(str(trace)).run()
    assert not at.exception, at.exception
    return at


def _goto(at: AppTest, t: int) -> AppTest:
    at.slider(key="run_rec_step").set_value(t).run()
    assert not at.exception, at.exception
    return at


def _md(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def _captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def _timeline(at: AppTest) -> dict:
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        if any(t.get("type") == "bar" for t in spec["data"]):
            return spec
    raise AssertionError("no timeline chart")


@pytest.fixture()
def srm_trace(tmp_path) -> Path:
    return _write(tmp_path / "runs" / "ep-srm.jsonl", _header("ep-srm", SRM, "srm"), _srm_steps())


@pytest.mark.page
def test_gate1_panel_accept_repair_drop(monkeypatch, tmp_path, srm_trace):
    at = _goto(_open(monkeypatch, tmp_path, srm_trace), 1)
    md = _md(at)
    assert "Gate-1: every proposed action" in md and ">ACCEPT</span>" in md
    assert "Gate-1 checks every action proposed" in _captions(at)  # the "what is this"
    _goto(at, 2)
    md = _md(at)
    assert ">REPAIR</span>" in md and ">DROP</span>" in md
    assert REPAIR_WORDS in md and DROP_WORDS in md  # the reason in words
    assert "REPAIR_CASE" in md and "NOT_IN_VALID_ACTIONS" in md  # the reason codes
    assert "→ <code>open door to kitchen</code>" in md  # the repaired form
    assert ">Swift</span> <code>fly to the moon</code>" in md  # the source
    assert "2 actions proposed: 1 REPAIR, 1 DROP." in _captions(at)
    assert "Self-reflection: " not in _captions(at)  # every SRM mechanism ran: no "not running" line


@pytest.mark.page
def test_menu_card(monkeypatch, tmp_path, srm_trace):
    at = _goto(_open(monkeypatch, tmp_path, srm_trace), 3)
    md = _md(at)
    assert "Ambiguity menu" in md and "<code>pick up thermometer</code> was ambiguous" in md
    assert "- **0**: thermometer on the table" in md and "- **1**: thermometer in the sink" in md
    assert "Answered **0** by Gate-1" in md and "the plan needs the one on the table" in md
    assert "Nothing was proposed to Gate-1 at this step (this step answered the game's numbered menu)." \
        in _captions(at)


@pytest.mark.page
def test_stagnation_and_critic_cards(monkeypatch, tmp_path, srm_trace):
    at = _goto(_open(monkeypatch, tmp_path, srm_trace), 4)
    md, caps = _md(at), _captions(at)
    # the stagnation report: modes in words with their codes and counts, the repeating observation, advice
    assert "Stagnation report" in md and STAG_WORDS in md and "<code>SAME_OBS_3</code>, seen 3 times" in md
    assert "This room is called the kitchen." in [t.value for t in at.text]
    assert "**Actions to avoid:** <code>look around</code>" in md
    assert "at most one move before acting on an object" in md
    # the Critic: status, diagnosis, correction, parsed vs admitted actions, policy, budget
    assert "**Critic**" in md and ">called</span>" in md
    assert DIAGNOSIS in md and "Turn on the stove, then wait." in md
    assert "2 proposed, 1 passed Gate-1 and entered the buffer (they replaced what was in the buffer)" in md
    assert "<code>activate stove</code> ✓ admitted" in md
    assert "<code>fly to the moon</code> <span" in md and DROP_WORDS in md
    assert "Budget: 2 of 3 calls used (1 left) · 1.5 s" in caps
    # the exact prompt sits in an expander, not in the main view
    raw = next(e for e in at.expander if e.label == "The Critic's exact prompt and raw output")
    assert any("CRITIC PROMPT" in c.value for c in raw.code)
    # the buffer panel marks the Critic's actions; the next step comes from them
    assert "1. <code>activate stove</code> <span" in md and "from the Critic" in md
    # the step list carries the marks; its detail shows the same cards (compact)
    labels = [e.label for e in at.expander if e.label.startswith("Step ")]
    assert "◆ stagnation" in labels[0] and "● Critic called" in labels[0] and "✗ Gate-1 dropped 1" in labels[0]


@pytest.mark.page
def test_critic_step_and_budget_so_far(monkeypatch, tmp_path, srm_trace):
    at = _goto(_open(monkeypatch, tmp_path, srm_trace), 5)
    md = _md(at)
    assert ">Critic</span>" in md  # the mode badge: the Critic's buffered action ran
    assert "taken from the buffer the Critic filled" in md
    assert "Not called at this step. So far: 2 of 3 calls used (1 left)." in _captions(at)
    assert "The stagnation detector saw no sign of going round in circles after this step." in _captions(at)


@pytest.mark.page
def test_timeline_lanes_and_hover(monkeypatch, tmp_path, srm_trace):
    at = _goto(_open(monkeypatch, tmp_path, srm_trace), 5)
    spec = _timeline(at)
    marks = {t["name"]: t for t in spec["data"] if t["type"] == "scatter"}
    assert {"⚡ switch to Sage", "Gate-1 drop", "stagnation report", "Critic called"} <= set(marks)
    assert marks["Gate-1 drop"]["x"] == [2, 4] and marks["Gate-1 drop"]["marker"]["symbol"] == "x"
    assert DROP_WORDS in marks["Gate-1 drop"]["hovertext"][0]
    assert STAG_WORDS in marks["stagnation report"]["hovertext"][0]
    assert "called" in marks["Critic called"]["hovertext"][0] and "heating the water" in marks["Critic called"][
        "hovertext"][0]
    ys = {name: t["y"][0] for name, t in marks.items()}
    assert len({ys["⚡ switch to Sage"], ys["Gate-1 drop"], ys["stagnation report"], ys["Critic called"]}) == 4
    assert spec["layout"]["yaxis"]["ticktext"] == ["acted", "switch", "Gate-1", "stagnation", "Critic"]
    assert all(t.get("mode") != "text" for t in spec["data"])  # no overlapping text labels


@pytest.mark.page
@pytest.mark.parametrize("mechanisms", [["swift", "sage"], []], ids=["baseline", "old-trace"])
def test_baseline_trace_shows_no_srm_panels(monkeypatch, tmp_path, mechanisms):
    steps = [_step(1, "look around"), _step(2, "open door to kitchen", system="sage",
                                            trigger=Trigger("stuck", "stuck: the rewards of the last 5 steps sum "
                                                                     "to 0"))]
    trace = _write(tmp_path / "runs" / "ep-base.jsonl", _header("ep-base", mechanisms, "baseline"), steps)
    at = _goto(_open(monkeypatch, tmp_path, trace), 2)
    md, caps = _md(at), _captions(at)
    assert ("Self-reflection: Gate-1, the stagnation detector and the Critic are not running in this preset "
            "(*baseline*)") in caps
    assert "Episodic memory (AMM) is not running in this preset (*baseline*)" in caps
    assert "Episodic memory (AMM) at this step" not in md
    for panel in ("Gate-1: every proposed", "Stagnation report", "**Critic**", "Self-reflection (SRM) at this step",
                  "Ambiguity menu"):
        assert panel not in md, panel
    assert not [e for e in at.expander if "self-reflection rules" in e.label]
    spec = _timeline(at)
    assert spec["layout"]["yaxis"]["ticktext"] == ["acted", "switch"]


# ----------------------------------------------------------------------------- pure helpers

def test_pending_actions_and_next_hint_read_records_only():
    assert pending_actions([]) == [] and next_hint([], done=False).startswith("Next step: Swift")
    steps = _srm_steps()
    assert pending_actions(steps[:4]) == [("activate stove", "critic")]
    assert next_hint(steps[:4], done=False) == "Next step: the Critic's actions in the buffer (1 action pending)."
    assert pending_actions(steps) == [] and next_hint(steps, done=True) is None
    sage = _step(1, "go to kitchen", system="sage", buffer_after=["look at stove", "open oven"], mode_after="sage")
    assert next_hint([sage], done=False) == "Next step: Sage's buffer (2 actions pending)."
    legacy = _step(1, "go to kitchen", system="sage", buffer_after=["look at stove"])  # mode_after left at default
    assert pending_actions([legacy]) == [("look at stove", "sage")]


def test_timeline_figure_puts_each_kind_in_its_own_lane():
    fig = timeline_figure(_srm_steps(), cursor=2, mechanisms=SRM)
    ys = {t.name: t.y[0] for t in fig.data if t.type == "scatter"}
    assert ys["⚡ switch to Sage"] < ys["Gate-1 drop"] < ys["stagnation report"] < ys["Critic called"]
    fig = timeline_figure(_srm_steps()[:1], mechanisms=["swift", "sage"])
    assert [t.type for t in fig.data] == ["bar"] and list(fig.layout.yaxis.ticktext) == ["acted", "switch"]


@pytest.mark.jvm
@pytest.mark.page
def test_a_real_srm_episode_renders_its_panels(monkeypatch, tmp_path, sw_env):
    """A trace recorded by the real agent (srm preset) in the real ScienceWorld: a looping Swift, a stagnation
    report, a Critic call (scripted LLM) whose actions pass Gate-1 and run from the buffer."""
    from agent_core.controller import Agent, ScriptedSwift
    from agent_core.env import catalog
    from agent_core.llm import ScriptedBackend

    critic = ("DIAGNOSIS: The agent keeps looking at the sink.\nCOURSE_CORRECTION: Go to the kitchen.\n"
              "ACTIONS:\n1. Action 1: teleport to kitchen --> you are in the kitchen\n2. focus on the sink\n")
    llm = ScriptedBackend(lambda p: critic if "You are the Critic" in p else "Q1: a pot" if "Q1" in p else "wait1")
    agent = Agent(preset("srm"), ScriptedSwift(lambda s, v: "look at sink"), llm, env=sw_env,
                  runs_dir=tmp_path / "runs")
    agent.start("boil", catalog().get("boil").test[0], split="test")
    recs = [agent.step() for _ in range(7)]
    agent.finish("stopped")
    at = _open(monkeypatch, tmp_path, agent.trace_path)
    _goto(at, 5)  # the stagnation report
    assert "REPEAT_ACTION_2_NO_EFFECT" in _md(at) and "gave the same observation" in _md(at)
    assert "look at sink" in _md(at)  # among the actions to avoid
    step = next(r.step for r in recs if r.critic)
    _goto(at, step)
    md = _md(at)
    assert "The agent keeps looking at the sink." in md and "1 of 3 calls used (2 left)" in _captions(at)
    assert "REPAIR_PREFIX" in md and "CRITIC_NO_FOCUS" in md and "teleport to kitchen" in md
    assert "a leading label such as 'Action 3:' was removed" in md


def test_progress_label_counts_seconds_and_estimates_from_this_episode():
    """While a step is in flight the Run page says who is thinking, the seconds so far, and how long such a
    call usually takes here (the median of this episode's finished calls of that kind)."""
    import time

    from agent_core.trace import LLMCall
    from views.progress import call_label, call_purpose, progress_label, usual_seconds

    assert call_purpose("You are Sage ...\nAnswer the five questions ...") == "plan"
    assert call_purpose("You are Sage ...\nCommands the game accepts right now:\n1. go to kitchen") == "ground"
    assert call_purpose("You are the Critic of an agent") == "critic"
    assert call_label("You are the Critic of an agent").startswith("the Critic")
    calls = [LLMCall("plan", "embedded", "q", "p", latency_s=x) for x in (10.0, 14.0, 30.0)]
    records = [_step(i + 1, "look around", llm_calls=[c]) for i, c in enumerate(calls)]
    assert usual_seconds(records, "plan") == (14.0, 3) and usual_seconds(records, "critic") == (None, 0)
    now = time.perf_counter()
    job = {"step": 4, "label": "Sage is planning (Q1-Q5)", "since": now - 7.2, "started": now - 7.5, "call": 1,
           "purpose": "plan"}
    text = progress_label(job, records)
    assert text.startswith("Step 4: Sage is planning (Q1-Q5), 7 s") and "usually ~14 s here, the median of the last 3" in text
    first = progress_label({**job, "purpose": "critic"}, records)
    assert "no estimate yet" in first


def test_switching_rules_are_worded_from_the_runs_own_config():
    from agent_core.config import preset
    from views.run_panels import rules

    cfg = preset("baseline")
    cfg.swift.focus_margin = 0.5
    words = "\n".join(rules(cfg.to_dict()))
    assert "rates no valid action at least -1.5" in words and "`controller.invalid_rule = ranked`" in words
    assert "no focus goes to Sage (`controller.critical_review = off`)" in words and "focus_margin" not in words
    cfg.controller.critical_review = "unsure"
    words = "\n".join(rules(cfg.to_dict()))
    assert "below 0.5 (`swift.focus_margin`)" in words
    cfg.controller.invalid_rule, cfg.controller.critical_review = "top1", "always"
    words = "\n".join(rules(cfg.to_dict()))
    assert "top action is not valid in the current state" in words and "swift.focus_margin" not in words


def test_the_sage_streak_rule_is_listed_only_where_the_run_had_it():
    from agent_core.config import preset
    from agent_core.trace import StepRecord, Trigger
    from views.run_panels import consequence, rules

    cfg = preset("baseline")
    assert any("**swift_forced**: after 2 Sage calls in a row" in r for r in rules(cfg.to_dict()))
    assert not any("unsure of becomes" in r for r in rules(cfg.to_dict()))  # critical_review = off: never happens
    cfg.controller.critical_review = "unsure"
    assert any("unsure of becomes its best other action" in r for r in rules(cfg.to_dict()))
    cfg.controller.sage_streak_limit = 0
    assert not any("swift_forced" in r for r in rules(cfg.to_dict()))
    old = cfg.to_dict()
    del old["controller"]["sage_streak_limit"]  # a trace recorded before the rule existed
    assert not any("swift_forced" in r for r in rules(old))
    rec = StepRecord(step=3, action="look around", system="swift", observation="", look="", inventory="", score=0,
                     reward=0, moves=3, done=False, failed=False, room="kitchen", trigger=Trigger("swift_forced", "back to Swift", {"set_aside": ["invalid", "unexpected"],
                                                                                 "sage_calls_in_a_row": 2}))
    assert consequence(rec) == ("Sage was not called (invalid, unexpected set aside): after 2 Sage calls in a row, "
                                "Swift acted once.")


@pytest.mark.page
def test_every_decision_kind_is_typed_round_trips_and_is_shown(monkeypatch, tmp_path):
    """Each kind in agent_core.decisions survives the trace file, gives the step's notes, and the Run page lists it."""
    from agent_core.decisions import KINDS, Note
    from agent_core.trace import read_episode
    from views.common import DECISION_LABELS

    every = [cls() for kind, cls in KINDS.items() if kind != "note"]
    assert len(every) >= 16 and set(KINDS) <= set(DECISION_LABELS)
    rec = _step(1, "look around", decisions=every, notes=[d.describe() for d in every])
    path = _write(tmp_path / "runs" / "ep-dec.jsonl", _header("ep-dec", SRM, "srm"), [rec])
    back = read_episode(path).steps[0]
    assert [type(d) for d in back.decisions] == [type(d) for d in every] and back.notes == rec.notes
    assert all(d.kind == type(d)().kind for d in back.decisions)
    # a schema-1 step's free-text notes open as `note` decisions
    old = json.loads(path.read_text().splitlines()[1])
    old.pop("decisions")
    assert isinstance(__import__("agent_core.trace", fromlist=["_from_dict"])._from_dict(
        StepRecord, {k: v for k, v in old.items() if k != "kind"}).decisions[0], Note)
    md = _md(_goto(_open(monkeypatch, tmp_path, path), 1))
    assert "Decisions in this step" in md
    for d in every:
        assert f"*{DECISION_LABELS[d.kind]}*" in md, d.kind


@pytest.mark.page
def test_sages_scored_options_are_shown_best_first(monkeypatch, tmp_path):
    """`sage.pick = score`: the step records every option's score, and the Run page lists them as a ranking."""
    from agent_core.decisions import OptionScores, SagePick

    scores = OptionScores(purpose="ground", options=["move metal pot to sink", "activate sink", "eat apple"],
                          scores=[-1.07, -1.8, -4.2])
    rec = _step(1, "move metal pot to sink", "sage", decisions=[scores, SagePick(action="move metal pot to sink",
                                                                                 option=7, of=12)],
                notes=[scores.describe()])
    path = _write(tmp_path / "runs" / "ep-scores.jsonl", _header("ep-scores", SRM, "srm"), [rec])
    at = _goto(_open(monkeypatch, tmp_path, path), 1)
    assert "Sage's options, scored" in _md(at)
    table = next(d.value for d in at.dataframe if "option" in d.value.columns and "score" in d.value.columns)
    assert list(table["option"]) == scores.options and list(table["rank"]) == [1, 2, 3]
    assert "'move metal pot to sink' -1.07" in _md(at)  # the decision's sentence, in the step's decisions


@pytest.mark.page
def test_a_call_whose_cache_was_given_back_or_lost_says_so(monkeypatch, tmp_path):
    """Sessions share the embedded model: a call after another session's says its cache was given back (the answer
    is the one it would get alone), and a call whose cache was dropped for room says its answer may differ."""
    calls = [LLMCall(purpose="plan", backend="embedded", model="m", prompt="PLAN PROMPT", output="Q1: stove",
                     prompt_tokens=600, cached_tokens=0, cache_state="restored"),
             LLMCall(purpose="critic", backend="embedded", model="m", prompt="CRITIC PROMPT", output="x",
                     prompt_tokens=700, cached_tokens=0, cache_state="lost"),
             LLMCall(purpose="plan", backend="embedded", model="m", prompt="LATER PROMPT", output="Q1: sink",
                     prompt_tokens=650, cached_tokens=500, cache_state="held")]
    steps = [_step(1, "look around", "sage", llm_calls=calls[:2]), _step(2, "look around", "sage", llm_calls=calls[2:])]
    path = _write(tmp_path / "runs" / "ep-cache.jsonl", _header("ep-cache", SRM, "srm"), steps)
    at = _goto(_open(monkeypatch, tmp_path, path), 1)
    assert "this run's cache was given back as it was" in _captions(at)
    assert "the answer may differ from the same run played alone" in _captions(at)
    at = _goto(at, 2)
    assert "150 read afresh, 500 from the model's cache" in _md(at)
    notes = [c.value for c in at.caption if "given back" in c.value or "played alone" in c.value]
    assert len(notes) == 2  # the call that found its cache held has none
