"""Roads not taken on the Run page (views/roads, views/branches) and in the offline export: the alternatives a
step's record offers, rolled out on demand with the real JVM and Swift (AppTest), drawn as branches with a
sentence each; a visitor of a shared app cannot start rollouts; Chromium draws them and a branch opens Compare;
the exported file shows them offline."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from agent_core import rollout as ro
from agent_core.config import apply_overrides, preset
from agent_core.controller import Agent, load_swift
from agent_core.decisions import OptionScores
from agent_core.env import catalog
from agent_core.llm import ScriptedBackend
from agent_core.trace import Gate1Decision, StepRecord, SwiftCandidate, read_episode
from views import branches

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "0_Run.py")
STEP = 4  # the step shown: its roads branch after step 3


def _rec(**kw) -> StepRecord:
    base = dict(step=4, action="open door", system="sage", observation="ok", look="", inventory="", score=0, reward=0,
                moves=4, done=False, failed=False, room="kitchen")
    return StepRecord(**{**base, **kw})


@pytest.mark.fast
def test_the_alternatives_come_from_the_record_played_first_at_most_five_more():
    rec = _rec(gate1=[Gate1Decision("sage", "eat door", "DROP", reason="NO_VERB")],
               swift_valid_ranked=[SwiftCandidate(a, 0.0, True) for a in ("go to hallway", "open door", "look at sink",
                                                                           "look at oven", "look at stove")],
               decisions=[OptionScores(options=["open door", "pick up cup", "go to hallway", "read book"],
                                       scores=[-0.1, -0.2, -0.3, -0.4])])
    cands = branches.candidates(rec)
    assert cands[0] == (branches.PLAYED, "open door")
    assert cands[1] == ("Swift's own choice", None)  # Sage acted: what Swift alone plays there
    assert ("the action Gate-1 dropped", "eat door") in cands
    assert ("Swift's best valid action", "go to hallway") in cands and ("Sage's next-scored option", "pick up cup") in cands
    assert len(cands) == 6 and len({a for _l, a in cands}) == 6  # never the same action twice
    swift_step = _rec(system="swift", swift_valid_ranked=[SwiftCandidate("open door", 0.0, True)])
    assert branches.candidates(swift_step) == [(branches.PLAYED, "open door")]


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    """A recorded Swift-alone episode of 8 steps in its own runs folder."""
    runs = tmp_path_factory.mktemp("runs")
    swift = load_swift(preset("swift"))
    agent = Agent(apply_overrides(preset("swift"), {"env.step_limit": 8}), swift, ScriptedBackend([]), runs_dir=runs)
    agent.start("boil", catalog().get("boil").test[0], split="test")
    agent.run()
    path = agent.trace_path
    agent.close()
    return read_episode(path)


def _roads_md(at) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith(("- With the action played", "- Had "))
            or (m.value.startswith("- ") and m.value.endswith(": not played out yet"))]


def _score_traces(at) -> list[str]:
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        names = [d.get("name") or "" for d in spec["data"]]
        if "score" in names:
            return names
    return []


def _runs_with(episode, tmp_path: Path) -> tuple[Path, Path]:
    """A runs folder holding a copy of the episode (the page's own folder, its rollouts cache beside it)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    trace = runs / episode.path.name
    shutil.copy(episode.path, trace)
    return runs, trace


def _page(monkeypatch, runs: Path, trace: Path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    monkeypatch.setenv("SWIFTSAGE_EXAMPLES_DIR", str(runs / "no-examples"))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["trace"] = str(trace)
    at.query_params["step"] = str(STEP)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
@pytest.mark.page
@pytest.mark.jvm
@pytest.mark.model
def test_roads_are_played_out_on_demand_and_drawn(monkeypatch, tmp_path, episode):
    runs, trace = _runs_with(episode, tmp_path)
    at = _page(monkeypatch, runs, trace)
    rows = _roads_md(at)
    assert rows and all("not played out yet" in r for r in rows)
    assert not any("branch" in n.lower() or n.startswith(branches.PLAYED) for n in _score_traces(at))
    button = at.button(key="roads_run")
    assert button.label.startswith(f"Play out {len(rows)} road(s) from step {STEP - 1}")
    button.click().run()
    for _ in range(120):  # the rollouts run in a background thread; the page is drawn again meanwhile
        time.sleep(1.0)
        at.run()
        if not any("not played out yet" in r for r in _roads_md(at)):
            break
    assert not at.exception, at.exception
    rows = _roads_md(at)
    played = episode.steps[STEP - 1].action
    assert rows[0].startswith(f"- With the action played, '{played}', at step {STEP}")
    assert all(r.startswith("- Had ") for r in rows[1:]) and len(rows) >= 2
    names = _score_traces(at)
    drawn = names[names.index("score") + 1:]
    assert drawn[0] == f"{branches.PLAYED}: {played}" and len([n for n in drawn if ": " in n]) == len(rows)
    made = sorted((runs / "rollouts").glob("rollout-*.jsonl"))
    assert len(made) == len(rows)
    assert all(read_episode(p).header.parent["run_id"] == episode.header.run_id for p in made)
    # another step shows its own roads (none yet); back at the step, they are there at once, from the cache
    at.slider(key="run_rec_step").set_value(STEP + 1).run()
    assert all("not played out yet" in r for r in _roads_md(at))
    at.slider(key="run_rec_step").set_value(STEP).run()
    assert _roads_md(at) == rows


@pytest.mark.slow
@pytest.mark.page
@pytest.mark.jvm
@pytest.mark.model
def test_a_visitor_sees_the_roads_but_cannot_start_rollouts(monkeypatch, tmp_path, episode):
    runs, trace = _runs_with(episode, tmp_path)
    monkeypatch.setenv("SWIFTSAGE_SHARE", "1")
    monkeypatch.setenv("SWIFTSAGE_PASSCODE", "a-long-teacher-passcode")
    at = _page(monkeypatch, runs, trace)
    assert not [b for b in at.button if b.key == "roads_run"]
    assert any("the teacher's app can do it" in c.value for c in at.caption)


def _made_roads(episode, runs: Path) -> list[ro.Rollout]:
    """The step's roads rolled out into the runs folder's cache (as the page's button does)."""
    reqs = [ro.RolloutRequest(str(episode.path), STEP - 1, a, "swift", ro.DEFAULT_HORIZON, label)
            for label, a in branches.candidates(episode.steps[STEP - 1])]
    outs = ro.run_rollouts(reqs, out=runs / "rollouts")
    assert all(o.rollout is not None for o in outs)
    return [o.rollout for o in outs]


@pytest.mark.slow
@pytest.mark.jvm
@pytest.mark.model
def test_the_export_carries_the_roads_for_its_steps(monkeypatch, tmp_path, episode):
    from views.export import episode_html

    runs = tmp_path / "runs"
    made = _made_roads(episode, runs)
    found = branches.episode_branches(episode, [runs / "rollouts"])
    assert list(found) == [STEP] and len(found[STEP]) == len(made)
    page = episode_html(episode, found)
    data = json.loads(page.split("const D = ", 1)[1].split(";\nconst FIG", 1)[0])
    road = data["roads"][str(STEP)]
    assert len(road["sentences"]) == len(made) and road["sentences"][0].startswith("With the action played")
    fig = json.loads(page.split("const FIG = ", 1)[1].split(";\nconst $", 1)[0])
    assert [fig["data"][i]["visible"] for i in road["traces"]] == [False] * len(made)  # shown at its step only


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.server
@pytest.mark.jvm
@pytest.mark.model
def test_roads_in_chromium_and_in_the_offline_export(monkeypatch, tmp_path, episode):
    from tests.browser_util import CHROMIUM, ROOT, chromium_page, served_app, wait_idle
    from views.export import export_episode

    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is missing (bash scripts/setup.sh --tests installs it)")
    runs, trace = _runs_with(episode, tmp_path)
    parent = read_episode(trace)
    made = _made_roads(parent, runs)
    with served_app(runs, ROOT / "tests" / "artifacts" / "roads_server.log") as url, chromium_page() as page:
        page.goto(f"{url}/?trace={trace}&step={STEP}")
        main = page.get_by_test_id("stMain")
        main.get_by_text("With the action played", exact=False).first.wait_for(timeout=120_000)
        assert main.get_by_text("Had ", exact=False).count() >= 1
        chart = page.get_by_test_id("stPlotlyChart").nth(1)
        chart.locator(".scatterlayer .trace").first.wait_for(state="attached", timeout=30_000)
        assert chart.locator(".scatterlayer .trace").count() >= 2 + len(made)  # score, rewards and the branches
        wait_idle(page)  # a click while the page is drawn again can land on a link being replaced
        link = main.get_by_role("link", name="Compare this branch with the episode").nth(1)
        link.click()
        body = page.get_by_test_id("stMain")
        body.get_by_text("B is a fork of A", exact=False).first.wait_for(timeout=60_000)
        wait_idle(page)
        text = body.inner_text()
        assert "Traceback" not in text and f"First difference at step {STEP}" in text, text[:2000]
        assert "Branch" in text, text[:2000]  # the branch's first step: the action given at the fork
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    out = export_episode(trace, tmp_path / "episode.html")  # finds the roads beside the runs
    with chromium_page() as page:
        page.route("**/*", lambda r: r.abort() if not r.request.url.startswith("file:") else r.continue_())
        page.goto(out.as_uri())
        for _ in range(STEP):
            page.keyboard.press("ArrowRight")
        roads = page.locator("#roads li")
        roads.first.wait_for(timeout=10_000)
        assert roads.count() == len(made) and roads.first.inner_text().startswith("With the action played")
        visible = page.evaluate("document.getElementById('score').data.filter(t => t.visible === true).length")
        assert visible == len(made)
        page.keyboard.press("ArrowRight")
        assert page.locator("#roads li").count() == 0
