"""The Evaluate and Compare pages (AppTest) on real evaluation output (tests/conftest.py's small_evaluation:
real Swift, real JVMs, SmolLM2 as Sage), links into the Run page, and forking from the Run page."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from agent_core.config import apply_overrides, preset
from agent_core.controller import Agent, ScriptedSwift
from agent_core.llm import ScriptedBackend

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120
pytestmark = [pytest.mark.slow, pytest.mark.page, pytest.mark.xdist_group("small_evaluation")]


@pytest.fixture(scope="module")
def evals(small_evaluation, tmp_path_factory) -> Path:
    """An evaluations folder holding the small evaluation (as the app finds it under evals/)."""
    root = tmp_path_factory.mktemp("evals_root")
    shutil.copytree(small_evaluation, root / "small")
    return root


def _trace(evals: Path, preset_name: str, task: str = "boil") -> Path:
    """The first test variation's trace of `task` under `preset_name`."""
    return min((evals / "small" / "traces" / preset_name).glob(f"{task}-v*-{preset_name}.jsonl"))


def _app(page: str, monkeypatch, evals: Path, runs: Path, query: dict | None = None, state: dict | None = None):
    monkeypatch.setenv("SWIFTSAGE_EVALS_DIR", str(evals))
    monkeypatch.setenv("SWIFTSAGE_SHIPPED_EVALS_DIR", str(runs / "no-shipped-evaluations"))
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=TIMEOUT)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    for k, v in (state or {}).items():
        at.session_state[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def _text(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [m.value for m in at.caption] + [m.value for m in at.info] +
                     [m.value for m in at.warning] + [m.value for m in at.error] + [m.value for m in at.success])


@pytest.mark.jvm
@pytest.mark.model
def test_evaluate_page_shows_the_tables_and_charts_of_a_real_evaluation(evals, monkeypatch, tmp_path):
    res = json.loads((evals / "small" / "results.json").read_text())
    at = _app("4_Evaluate.py", monkeypatch, evals, tmp_path)
    table1 = at.dataframe[0].value
    assert list(table1["config"]) == ["Baseline", "+SRM"]
    for i, p in enumerate(("baseline", "srm")):
        assert table1["Final"][i] == pytest.approx(res["presets"][p]["final"], abs=0.01)
        assert table1["episodes"][i] == 4
    assert "8 of 8 episodes finished" in _text(at)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    titles = [c["layout"]["title"]["text"] for c in charts]
    assert titles == ["Final score per task", "Final by task group (gold-path length)",
                      "Mechanism activity (mean per episode)"]
    per_task = charts[0]
    assert [t["name"] for t in per_task["data"]] == ["Baseline", "+SRM"]
    assert per_task["data"][0]["x"] == ["boil", "lifespan-longest-lived"]
    mech = at.dataframe[2].value
    gate = mech[mech["mechanism (mean per episode)"] == "Gate-1 decisions"].iloc[0]
    assert float(gate["Baseline"]) == 0 and float(gate["+SRM"]) > 0
    paired = at.dataframe[3].value  # each preset against Baseline on the same task-variations
    assert list(paired["config"]) == ["+SRM"] and paired["pairs"][0] == 4
    iv = res["paired"]["srm"]["interval"]
    assert paired["mean difference"][0] == pytest.approx(iv["mean"]) and paired["diverged"][0] == \
        res["paired"]["srm"]["diverged"]
    assert "Paired against Baseline" in [h.value for h in at.subheader]
    episodes = at.dataframe[-1].value
    assert len(episodes) == 8 and set(episodes["preset"]) == {"baseline", "srm"}
    # a filter narrows the episode list
    at.selectbox(key="eval_filter_kind").set_value("successes").run()
    assert set(at.dataframe[-1].value["task"]) == {"lifespan-longest-lived"}


@pytest.mark.jvm
@pytest.mark.model
def test_a_link_opens_the_measurement_record_not_the_shipped_evaluation_of_the_same_name(evals, monkeypatch, tmp_path):
    """The shipped cpu-30x2x30 and the record of the same name under evals/ are two evaluations: the page lists the
    shipped one first, labels both, and names the chosen one in the URL so that a link opens that one."""
    from views import sources

    mine, shipped = tmp_path / "evals", tmp_path / "shipped"
    shutil.copytree(evals / "small", shipped / "small")
    shutil.copytree(evals / "small", mine / "small")
    (mine / sources.RECORDS_FILE).write_text("small\n")
    monkeypatch.setenv("SWIFTSAGE_SHIPPED_EVALS_DIR", str(shipped))
    monkeypatch.setenv("SWIFTSAGE_EVALS_DIR", str(mine))
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(tmp_path / "runs"))
    at = AppTest.from_file(str(ROOT / "pages" / "4_Evaluate.py"), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    box = at.sidebar.selectbox(key="eval_dir")
    assert box.value == str((shipped / "small").resolve())
    assert box.options == ["small (shipped)", "small (measurement record)"]
    link = sources.link_path(shipped / "small")
    assert at.query_params["eval"] in ([link], link)
    record = str((mine / "small").resolve())
    at2 = AppTest.from_file(str(ROOT / "pages" / "4_Evaluate.py"), default_timeout=TIMEOUT)
    at2.query_params["eval"] = sources.link_path(mine / "small")
    at2.run()
    assert not at2.exception, at2.exception
    assert at2.sidebar.selectbox(key="eval_dir").value == record


def test_evaluate_page_without_evaluations_says_how_to_make_one(monkeypatch, tmp_path):
    at = _app("4_Evaluate.py", monkeypatch, tmp_path / "none", tmp_path)
    assert "No evaluations yet" in _text(at) and "python -m agent_core.evaluate" in _text(at)


@pytest.mark.jvm
@pytest.mark.model
def test_compare_page_from_a_link(evals, monkeypatch, tmp_path):
    a, b = _trace(evals, "baseline"), _trace(evals, "srm")
    at = _app("5_Compare.py", monkeypatch, evals, tmp_path, query={"a": str(a), "b": str(b)})
    assert at.selectbox(key="cmp_a").value == str(a) and at.selectbox(key="cmp_b").value == str(b)
    text = _text(at)
    assert "**A:** boil v21 · baseline" in text and "**B:** boil v21 · srm" in text
    assert "play different episodes" not in text
    assert "First difference at step" in text or "same actions" in text
    steps = at.dataframe[0].value
    assert len(steps) == 10 and list(steps.columns[:3]) == ["step", "same", "A who"]
    mech = at.dataframe[1].value
    row = mech[mech[""] == "Gate-1 decisions"].iloc[0]
    assert row["A"] == "0" and int(row["B"]) > 0
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [d["name"] for d in spec["data"]] == ["A", "B"] and len(spec["data"][0]["y"]) == 11  # start + 10 steps
    # the choice lives in the URL
    assert at.query_params["a"] == [str(a)] or at.query_params["a"] == str(a)


@pytest.mark.jvm
@pytest.mark.model
def test_compare_page_refuses_a_link_outside_the_trace_folders(evals, monkeypatch, tmp_path):
    outside = tmp_path / "elsewhere" / "x.jsonl"
    outside.parent.mkdir()
    shutil.copyfile(_trace(evals, "baseline"), outside)
    at = _app("5_Compare.py", monkeypatch, evals, tmp_path / "runs", query={"a": str(outside)})
    assert any("is not a recorded episode this app can open" in e.value for e in at.error)
    assert str(outside) not in at.selectbox(key="cmp_a").options


@pytest.mark.jvm
@pytest.mark.model
def test_run_page_opens_an_evaluation_trace_from_a_link_and_forks_it(evals, monkeypatch, tmp_path):
    parent = _trace(evals, "baseline")
    made = []

    def factory(cfg):
        agent = Agent(cfg, ScriptedSwift(["look around"] * 20), ScriptedBackend([]), env=None,
                      runs_dir=tmp_path / "runs")
        made.append(agent)
        return agent

    at = _app("0_Run.py", monkeypatch, evals, tmp_path / "runs", query={"trace": str(parent), "step": "3"},
              state={"agent_factory": factory})
    assert at.radio(key="run_source").value == "Recorded episode"
    assert at.selectbox(key="run_trace").value == str(parent) and at.slider(key="run_rec_step").value == 3
    at.selectbox(key="run_fork_preset").set_value("srm")
    at.toggle(key="run_fork_quick").set_value(True)
    at.button(key="run_fork").click().run()
    assert not at.exception, at.exception
    assert at.radio(key="run_source").value == "Live run" and len(made) == 1
    agent = made[0]
    assert agent.cfg.preset == "srm" and not agent.cfg.controller.sage_enabled  # quick demo: no model calls
    assert len(agent.records) == 3 and all(r.replayed for r in agent.records)
    assert any("This run is a fork of" in m.value for m in at.info)
    at.button(key="run_step").click().run()
    assert not at.exception and len(agent.records) == 4 and not agent.records[-1].replayed
    assert agent.records[-1].gate1  # the fork's own preset (srm) acts from step 4
    agent.close()


def test_evaluate_page_opens_the_shipped_cpu_evaluation_on_a_fresh_install(monkeypatch, tmp_path):
    """No evaluation of one's own yet: the page shows the one shipped in assets/evaluations (issue 13's CPU run)."""
    monkeypatch.setenv("SWIFTSAGE_EVALS_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("SWIFTSAGE_SHIPPED_EVALS_DIR", raising=False)
    at = AppTest.from_file(str(ROOT / "pages" / "4_Evaluate.py"), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    shipped = json.loads((ROOT / "assets" / "evaluations" / "cpu-30x2x30" / "results.json").read_text())
    table1 = at.dataframe[0].value
    assert list(table1["config"]) == ["Baseline", "+AMM", "+SRM", "Full", "Swift alone"]
    assert list(table1["episodes"]) == [60] * 5
    assert table1["Final"][0] == pytest.approx(shipped["presets"]["baseline"]["final"], abs=0.01)
    assert "300 of 300 episodes finished" in _text(at)
    # one revision played all 300 episodes, each task-variation's five whole on one kind of machine, but not all on the
    # same kind: the page names no second revision, names both machines, and its paired table counts no pair across them
    warning = " ".join(w.value for w in at.warning)
    assert len(shipped["provenance"]["code"]) == 1
    assert "more than one code revision" not in warning
    machines = shipped["provenance"]["machines"]
    assert len(machines) == 2 and sum(machines.values()) == 300
    assert "played on more than one machine" in warning
    for m, n in machines.items():
        assert f"{m} ({n})" in warning
    paired = next(d.value for d in at.dataframe if "pairs on two machines" in d.value.columns)
    assert list(paired["config"]) == ["+AMM", "+SRM", "Full", "Swift alone"]
    assert list(paired["pairs"]) == [60] * 4
    assert list(paired["pairs on two machines"]) == [0] * 4
