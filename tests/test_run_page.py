"""The Run page, run for real with Streamlit's AppTest: a scripted Swift and LLM on the real
ScienceWorld JVM (live view), and recorded traces written with the real TraceWriter (replay view)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from agent_core.config import preset
from agent_core.controller import Agent, ScriptedSwift
from agent_core.env import catalog
from agent_core.llm import ScriptedBackend
from agent_core.trace import EpisodeHeader, StepRecord, Trigger, TraceWriter

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "0_Run.py")
TIMEOUT = 120

PLAN = """Q1: The water is in the sink of the kitchen; a metal pot is in the cupboard.
Q2: The pot and the water are not collected yet.
Q3: Fill the pot with water, put it on the stove, turn the stove on.
Q4: Nothing is done yet; focus on getting to the kitchen.
Q5: No mistake so far."""


@pytest.fixture(scope="module")
def embedder():
    from memory_store.embeddings import get_embedder

    return get_embedder()


@pytest.fixture()
def factory(tmp_path, sw_env, embedder):
    """cfg -> Agent: Swift first proposes an impossible action (the invalid rule fires), Sage plans and
    buffers two actions, then Swift acts again (buffer_empty)."""
    made = []

    def make(cfg):
        cfg.sage.max_picks = 2  # Sage's scripted reply names two commands; both go to the buffer
        agent = Agent(cfg, ScriptedSwift(["fly to the moon", "look around", "look around", "look around",
                                          "look around"]),
                      ScriptedBackend([PLAN, "1. teleport to kitchen\n2. look at stove\n"]),
                      env=sw_env, runs_dir=tmp_path / "runs", embedder=embedder)
        made.append(agent)
        return agent

    make.made = made
    return make


def _page(monkeypatch, runs_dir: Path, factory=None) -> AppTest:
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs_dir))
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.session_state["run_source"] = "Live run"  # not the first-visit example
    if factory is not None:
        at.session_state["agent_factory"] = factory
    at.run()
    assert not at.exception, at.exception
    return at


def _metric(at: AppTest, label_start: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label_start))


def _charts(at: AppTest) -> dict[str, dict]:
    """Plotly specs by chart key (timeline, score)."""
    out = {}
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        key = "timeline" if any(t.get("type") == "bar" for t in spec["data"]) else "score"
        out[key] = spec
    return out


def _md(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.page
def test_reset_step_run_n(monkeypatch, tmp_path, factory):
    at = _page(monkeypatch, tmp_path / "runs", factory)
    assert "press **Reset**" in at.info[0].value
    assert all(c.value for c in at.caption)  # every panel explains itself in words
    task = catalog().get("boil")
    at.selectbox(key="run_task").set_value("boil").run()
    assert at.selectbox(key="run_variation").options == [str(v) for v in task.test]

    at.button(key="run_reset").click().run()
    assert not at.exception, at.exception
    assert _metric(at, "Step") == "0"
    assert "### Step 0 · boil (variation 21, test)" in _md(at)
    assert any("boil" in c.value for c in at.caption)  # the task description
    assert "Swift (fast)" in _md(at)  # the mode badge: the agent starts with Swift

    at.button(key="run_step").click().run()
    assert not at.exception, at.exception
    assert _metric(at, "Step") == "1"
    md = _md(at)
    assert "### Step 1 ·" in md and "Sage (slow)" in md  # the mode badge
    assert "`teleport to kitchen`" in md  # the action, consumed from the buffer
    assert any("Rule **invalid** fired" in i.value and "Sage was called" in i.value for i in at.info)
    assert "Q3. Which subgoals" in md and "turn the stove on" in md  # the plan Q1-Q5
    assert "1. <code>look at stove</code>" in md  # the pending buffer (escaped inside <code>)
    timeline = _charts(at)["timeline"]
    hover = json.dumps(timeline["data"])
    assert "invalid" in hover and "not valid in the current state" in hover  # the trigger reason on hover
    assert [len(_charts(at)["score"]["data"][-1]["x"])] == [1]
    assert len(at.expander) >= 2  # the step list (+ the rules)

    at.number_input(key="run_n_steps").set_value(3).run()
    at.button(key="run_run_n").click().run()  # one step per script run, st.rerun() in between
    assert not at.exception, at.exception
    assert _metric(at, "Step") == "4"
    assert not at.session_state["run_running"]
    charts = _charts(at)
    score = next(t for t in charts["score"]["data"] if t.get("name") == "score")
    assert score["x"] == [1, 2, 3, 4]
    bars = {t["name"]: t["x"] for t in charts["timeline"]["data"] if t["type"] == "bar"}
    assert bars == {"Swift (fast)": [3, 4], "Sage (slow)": [1, 2]}
    assert "buffer_empty" in json.dumps(charts["timeline"]["data"])
    assert "Swift (fast)" in _md(at)
    labels = [e.label for e in at.expander if e.label.startswith("Step ")]
    assert labels[0].startswith("Step 4 · Swift (fast) · look around") and labels[-1].startswith("Step 1 ·")
    assert len(factory.made) == 1  # one agent per session, reused across steps
    changed = lambda: [i.value for i in at.sidebar.info if i.value.startswith("Settings changed")]  # noqa: E731
    assert changed() == []  # nothing changed since Reset
    at.number_input(key="run_step_limit").set_value(77).run()
    assert changed()
    at.button(key="run_reset").click().run()  # the Reset that uses them says nothing is pending any more
    assert changed() == [] and len(factory.made) == 2


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.page
def test_run_to_end_stops_at_done_and_pause(monkeypatch, tmp_path, factory, sw_env):
    try:
        at = _page(monkeypatch, tmp_path / "runs", factory)
        at.number_input(key="run_step_limit").set_value(3).run()  # the agent's step limit governs the episode
        at.button(key="run_reset").click().run()
        assert factory.made[-1].cfg.env.step_limit == 3 and sw_env.cfg.step_limit == 3
        at.button(key="run_run_end").click().run()
        assert not at.exception, at.exception
        assert _metric(at, "Step") == "3" and not at.session_state["run_running"]
        assert any("Episode over: **step_limit**" in w.value for w in at.warning)
        at.button(key="run_pause").click().run()
        assert _metric(at, "Step") == "3" and not at.session_state["run_running"]
    finally:
        sw_env.cfg.step_limit = 100


@pytest.mark.jvm
@pytest.mark.page
def test_step_without_reset_and_llm_error_are_shown(monkeypatch, tmp_path, sw_env, embedder):
    from agent_core.llm import LLMConnectionError

    def make(cfg):
        err = LLMConnectionError("openai", "cannot reach the LLM server at http://127.0.0.1:9/v1")
        return Agent(cfg, ScriptedSwift(["fly to the moon"]), ScriptedBackend([err]), env=sw_env,
                     runs_dir=tmp_path / "runs", embedder=embedder)

    at = _page(monkeypatch, tmp_path / "runs", make)
    at.button(key="run_step").click().run()
    assert not at.exception and "press **Reset**" in at.error[0].value
    at.button(key="run_reset").click().run()
    at.button(key="run_step").click().run()
    assert not at.exception, at.exception
    assert any("cannot reach the LLM server" in e.value for e in at.error)  # surfaced on the step
    assert any("LLM error" in e.label for e in at.expander)


def _write_trace(path: Path, n: int, truncate: bool = False, corrupt: bool = False) -> Path:
    header = EpisodeHeader(task="boil", task_index=0, variation=21, split="test",
                           task_description="Your task is to boil water.", config=preset("baseline").to_dict(),
                           models={"swift": "scripted", "sage": "scripted:scripted"}, run_id=path.stem,
                           initial_observation="You are in the hallway.", initial_look="This room is called the "
                           "hallway.", initial_inventory="In your inventory, you see: an orange")
    with TraceWriter(path, header) as w:
        for i in range(1, n + 1):
            w.append(StepRecord(step=i, action=f"action number {i}", system="sage" if i == 2 else "swift",
                                observation=f"observation number {i}", look=f"look {i}", inventory="an orange",
                                score=10.0 * (i // 2), reward=10.0 if i % 2 == 0 else 0.0, moves=i, done=False,
                                failed=False, room="kitchen",
                                trigger=Trigger("stuck", "stuck: the rewards of the last 5 steps sum to 0")
                                if i == 2 else None, plan={"Q1": "the pot"} if i >= 2 else {}))
    if corrupt:
        lines = path.read_text().splitlines(keepends=True)
        lines[2] = "{this is not json\n"
        path.write_text("".join(lines))
    if truncate:
        with open(path, "a") as fh:
            fh.write('{"kind": "step", "step": 9')
    return path


def _recorded(monkeypatch, tmp_path, name: str, n: int) -> AppTest:
    """The Run page on a written n-step trace, opened as a recorded episode."""
    runs = tmp_path / "runs"
    _write_trace(runs / name, n)
    at = _page(monkeypatch, runs)
    at.radio(key="run_source").set_value("Recorded episode").run()
    assert not at.exception, at.exception
    return at


@pytest.mark.page
def test_recorded_episode_scrubs(monkeypatch, tmp_path):
    at = _recorded(monkeypatch, tmp_path, "ep-good.jsonl", 4)
    assert at.selectbox(key="run_trace").value.endswith("ep-good.jsonl")
    assert _metric(at, "Step") == "0" and "You are in the hallway." in [t.value for t in at.text]
    at.slider(key="run_rec_step").set_value(3).run()
    assert not at.exception, at.exception
    assert _metric(at, "Step (of 4)") == "3"
    texts = [t.value for t in at.text]
    assert "observation number 3" in texts and "look 3" in texts
    assert "### Step 3 · boil (variation 21, test)" in _md(at)
    assert any(c.proto.spec for c in at.get("plotly_chart"))
    at.slider(key="run_rec_step").set_value(2).run()
    assert "observation number 2" in [t.value for t in at.text]
    assert "Sage (slow)" in _md(at) and any("**stuck**" in i.value for i in at.info)
    at.button(key="run_rec_next").click().run()
    assert _metric(at, "Step (of 4)") == "3"


@pytest.mark.page
def test_a_long_step_list_is_paged(monkeypatch, tmp_path):
    """45 steps: the list draws one page of 20 expanders, newest first, and the selector turns the pages."""
    at = _recorded(monkeypatch, tmp_path, "ep-long.jsonl", 45)
    at.slider(key="run_rec_step").set_value(45).run()
    assert not at.exception, at.exception

    def listed() -> list[int]:
        return [int(e.label.split("·")[0].split()[-1]) for e in at.expander if e.label.startswith("Step ")]

    pages = at.selectbox(key="run_list_rec_page")
    assert pages.options == ["steps 45-26", "steps 25-6", "steps 5-1"]
    assert listed() == list(range(45, 25, -1))
    pages.set_value(2).run()
    assert not at.exception, at.exception
    assert listed() == [5, 4, 3, 2, 1]
    at.slider(key="run_rec_step").set_value(30).run()  # back at step 30: two pages, the third one gone
    assert not at.exception, at.exception
    assert at.selectbox(key="run_list_rec_page").options == ["steps 30-11", "steps 10-1"]
    assert listed() in (list(range(30, 10, -1)), list(range(10, 0, -1)))


@pytest.mark.page
def test_live_settings_survive_a_trip_to_the_recorded_view(monkeypatch, tmp_path):
    monkeypatch.setenv("SWIFTSAGE_EXAMPLES_DIR", str(tmp_path / "no-examples"))
    at = _page(monkeypatch, tmp_path / "runs")
    at.selectbox(key="run_task").set_value("melt").run()
    at.selectbox(key="run_preset").set_value("full").run()
    at.radio(key="run_source").set_value("Recorded episode").run()
    assert "No recorded episodes yet" in at.info[0].value
    at.radio(key="run_source").set_value("Live run").run()
    assert at.selectbox(key="run_task").value == "melt" and at.selectbox(key="run_preset").value == "full"


@pytest.mark.page
def test_the_sidebar_shows_the_variations_own_task_text(monkeypatch, tmp_path):
    """boil's general text is "boil water"; test variation 21 boils lead (assets/variation_texts.json.gz)."""
    at = _page(monkeypatch, tmp_path / "runs")
    at.selectbox(key="run_task").set_value("boil").run()
    at.selectbox(key="run_variation").set_value(21).run()
    text = " ".join(c.value for c in at.sidebar.caption)
    assert "Your task is to boil lead." in text and "boil water" not in text


@pytest.mark.page
def test_corrupt_and_truncated_traces(monkeypatch, tmp_path):
    runs = tmp_path / "runs"
    bad = _write_trace(runs / "ep-bad.jsonl", 3, corrupt=True)
    at = _page(monkeypatch, runs)
    at.radio(key="run_source").set_value("Recorded episode").run()
    assert not at.exception, at.exception
    assert "cannot be read" in at.error[0].value and "ep-bad.jsonl:3" in at.error[0].value
    assert "Showing the 2 readable steps" in at.error[0].value  # steps 1 and 3; line 3 held step 2
    at.slider(key="run_rec_step").set_value(2).run()
    assert "observation number 3" in [t.value for t in at.text]
    bad.unlink()
    _write_trace(runs / "ep-cut.jsonl", 2, truncate=True)
    at.run()
    assert not at.exception, at.exception
    assert "half-written" in at.warning[0].value
    at.slider(key="run_rec_step").set_value(2).run()
    assert "observation number 2" in [t.value for t in at.text]


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.page
def test_product_path_with_unreachable_llm_server(monkeypatch, tmp_path):
    """No factory: the page loads the real Swift checkpoint and an OpenAI-compatible backend whose server
    does not exist; the step still happens and the connection error is shown on it."""
    at = _page(monkeypatch, tmp_path / "runs")
    at.selectbox(key="run_backend").set_value("openai").run()
    at.text_input(key="run_base_url").input("http://127.0.0.1:9/v1").run()
    at.button(key="run_reset").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    agent = at.session_state["run_agent"]
    try:
        assert _metric(at, "Step") == "0" and agent.llm.name == "openai"
        at.button(key="run_step").click().run()
        assert not at.exception, at.exception
        assert _metric(at, "Step") == "1"
        rec = agent.records[0]
        if rec.llm_calls:  # Sage was called (a switching rule fired): its failure must be visible
            assert any("cannot reach the LLM server" in e.value for e in at.error)
        assert list((tmp_path / "runs").glob("*.jsonl"))  # recorded where SWIFTSAGE_RUNS_DIR says
    finally:
        agent.close()


@pytest.mark.page
def test_shipped_example_episodes_are_complete_and_scrub(monkeypatch, tmp_path):
    """The examples a teacher demos without a model: 3+ tasks, complete, both systems, open and scrub."""
    from agent_core.trace import list_traces, read_episode

    shipped = list_traces(ROOT / "assets" / "episodes")
    episodes = [read_episode(p) for p in shipped]
    assert len({e.header.task for e in episodes}) >= 3
    for e in episodes:
        assert e.summary is not None and e.truncated_tail is None and e.summary.steps == len(e.steps)
    # most show both systems at work; a short one may show a sure Swift acting alone (no rule calls Sage)
    both = [e for e in episodes if {"swift", "sage"} <= {s.system for s in e.steps}
            and any(s.llm_calls for s in e.steps) and any(s.trigger for s in e.steps)]
    assert len(both) >= 4 and any(e.summary.success for e in episodes)
    by_preset = {e.header.config.get("preset"): e for e in episodes}
    for name in ("amm", "full"):  # memory examples in which T1 / T4 retrievals happen
        e = by_preset[name]
        assert any(x.trigger in ("T1", "T4") and x.injected_text for s in e.steps for x in s.retrievals), name
        assert any(w.id for s in e.steps for w in s.memories_written), name
    at = _page(monkeypatch, tmp_path / "empty-runs")
    at.radio(key="run_source").set_value("Recorded episode").run()
    assert not at.exception, at.exception
    for p in shipped:
        at.selectbox(key="run_trace").set_value(str(p)).run()
        n = len(read_episode(p).steps)
        at.slider(key="run_rec_step").set_value(n).run()
        assert not at.exception, at.exception
        assert _metric(at, f"Step (of {n})") == str(n)
        assert any(c.proto.spec for c in at.get("plotly_chart"))


@pytest.mark.jvm
@pytest.mark.page
def test_quick_demo_runs_swift_alone(monkeypatch, tmp_path, factory):
    """The sidebar's quick demo: Swift acts alone (controller.sage_enabled = false), so no step calls a model,
    and the episode header says Sage is not among the mechanisms that ran."""
    at = _page(monkeypatch, tmp_path / "runs", factory)
    at.selectbox(key="run_preset").set_value("srm").run()  # a preset with a Critic: it is off too
    at.toggle(key="run_quick").set_value(True).run()
    assert any("Swift acts alone" in c.value for c in at.caption)
    at.button(key="run_reset").click().run()
    at.button(key="run_step").click().run()
    at.button(key="run_step").click().run()
    assert not at.exception, at.exception
    agent = factory.made[-1]
    assert agent.cfg.controller.sage_enabled is False and agent.cfg.srm.critic_enabled is False
    assert [r.system for r in agent.records] == ["swift", "swift"]
    assert not any(r.llm_calls for r in agent.records)  # "fly to the moon" is invalid, yet no Sage call
    mech = at.session_state["run_header"].mechanisms
    assert "sage" not in mech and "critic" not in mech and "gate1" in mech


def test_search_inside_an_episode_finds_kinds_and_text():
    from agent_core.trace import read_episode
    from views.episode_search import next_hit, search

    ep = read_episode(ROOT / "assets" / "episodes" / "inclined-plane-friction-named-surfaces-v1038-full.jsonl")
    drops = [r.step for r in ep.steps if any(g.decision == "DROP" for g in r.gate1)]
    assert drops and search(ep.steps, kinds=["Gate-1 drop"]) == drops
    timer = [r.step for r in ep.steps if "stopwatch" in f"{r.action} {r.observation}".lower()]
    assert search(ep.steps, "  StopWatch ") == timer
    both = search(ep.steps, "stopwatch", ["Gate-1 drop"])
    assert set(both) == set(timer) & set(drops)
    assert search(ep.steps) == [] and next_hit([], 3) is None
    assert next_hit([2, 5, 9], 5) == 9 and next_hit([2, 5, 9], 9) == 2 and next_hit([2, 5, 9], 2, forward=False) == 9


@pytest.mark.page
def test_search_marks_hits_on_the_timeline_and_jumps(monkeypatch, tmp_path):
    from agent_core.trace import read_episode

    full = ROOT / "assets" / "episodes" / "inclined-plane-friction-named-surfaces-v1038-full.jsonl"
    drops = [r.step for r in read_episode(full).steps if any(g.decision == "DROP" for g in r.gate1)]
    at = _page(monkeypatch, tmp_path / "runs")
    at.radio(key="run_source").set_value("Recorded episode").run()
    at.selectbox(key="run_trace").set_value(str(full)).run()
    at.multiselect(key="run_search_kinds").set_value(["Gate-1 drop"]).run()
    assert not at.exception, at.exception
    assert any(c.value.startswith(f"{len(drops)} step(s) match") for c in at.sidebar.caption)
    at.button(key="run_hit_next").click().run()
    assert _metric(at, "Step (of") == str(drops[0])
    at.button(key="run_hit_next").click().run()
    assert _metric(at, "Step (of") == str(drops[1 % len(drops)])
    stars = [t for t in _charts(at)["timeline"]["data"] if t.get("name") == "search hit"]
    assert stars and stars[0]["x"] == drops
