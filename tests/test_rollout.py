"""Rollouts (agent_core.rollout) and decision values (agent_core.evaluate.decision_value) with the real JVM and
Swift: a branch from step K replays exactly, plays the given action, and Swift alone plays on; the policy's own
choice reproduces a Swift-alone episode; rollouts are cached, cancellable and never half kept; an evaluated episode
makes none; a decision's value is the difference of its two branches."""
from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from agent_core import rollout as ro
from agent_core.config import apply_overrides, preset
from agent_core.controller import Agent, load_swift
from agent_core.decisions import SagePick
from agent_core.env import catalog
from agent_core.evaluate import decision_value as dv
from agent_core.llm import ScriptedBackend
from agent_core.trace import Gate1Decision, read_episode

pytestmark = [pytest.mark.jvm, pytest.mark.model, pytest.mark.xdist_group("test_rollout")]

TASK = "boil"
LIMIT = {"env.step_limit": 12}


@pytest.fixture(scope="module")
def swift():
    return load_swift(preset("swift"))


@pytest.fixture(scope="module")
def parent(swift, tmp_path_factory):
    """A Swift-alone episode: the continuation policy itself, so its own choice must replay it."""
    runs = tmp_path_factory.mktemp("runs")
    agent = Agent(apply_overrides(preset("swift"), LIMIT), swift, ScriptedBackend([]), runs_dir=runs)
    agent.start(TASK, catalog().get(TASK).test[0], split="test")
    agent.run()
    path = agent.trace_path
    agent.close()
    ep = read_episode(path)
    assert len(ep.steps) == 12
    return ep


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    r = ro.RolloutRunner(tmp_path_factory.mktemp("rollouts"))
    yield r
    r.close()


@pytest.mark.slow
def test_a_branch_replays_plays_the_action_and_swift_plays_on(parent, runner):
    other = next(a.action for a in parent.steps[3].swift_valid_ranked[1:] if a.action != parent.steps[3].action)
    req = ro.RolloutRequest(str(parent.path), 3, other, horizon=4, label="test")
    before = ro.STARTED
    r = runner.run(req, ep=parent)
    assert ro.STARTED == before + 1 and not r.cached
    branch = read_episode(r.path)
    info = branch.header.parent
    assert info["step"] == 3 and info["trace"] == str(parent.path)
    assert info["branch"] == {"key": r.key, "action": other, "policy": "swift", "horizon": 4, "label": "test",
                              "point": ro.branch_point_digest(parent, 3), "commit": r.commit}
    assert r.commit and ro.find_rollouts([Path(r.path).parent], parent, 3, "swift", 4)
    assert [s.replayed for s in branch.steps] == [True] * 3 + [False] * 5
    assert [s.action for s in branch.steps[:3]] == [s.action for s in parent.steps[:3]]
    first = branch.steps[3]
    assert first.system == "branch" and first.action == other == r.first_action
    assert all(s.system == "swift" for s in branch.steps[4:])
    assert branch.summary.reason == ro.HORIZON_END and r.end_step == 8 and len(r.scores) == 5
    assert r.start_score == parent.steps[2].score and r.final == branch.steps[-1].score
    # asked again: read back from the cache, nothing played
    again = runner.run(req, ep=parent)
    assert again.cached and ro.STARTED == before + 1 and again.path == r.path and again.scores == r.scores


@pytest.mark.slow
def test_the_policys_own_choice_reproduces_the_swift_alone_episode(parent, runner):
    r = runner.run(ro.RolloutRequest(str(parent.path), 5, None, horizon=3), ep=parent)
    branch = read_episode(r.path)
    mine = [s for s in branch.steps if not s.replayed]
    assert [s.action for s in mine] == [s.action for s in parent.steps[5:9]]
    assert [s.observation for s in mine] == [s.observation for s in parent.steps[5:9]]
    assert r.scores == [s.score for s in parent.steps[5:9]]
    # to the episode's step limit when the horizon reaches past it
    end = runner.run(ro.RolloutRequest(str(parent.path), 9, None, horizon=10), ep=parent)
    assert end.end_step == 12 and end.ended == "step_limit"


@pytest.mark.slow
def test_a_cancelled_rollout_leaves_nothing_and_bad_requests_are_clear(parent, runner):
    stop = threading.Event()
    req = ro.RolloutRequest(str(parent.path), 2, None, horizon=6)
    with pytest.raises(ro.RolloutCancelled):
        runner.run(req, ep=parent, cancel=stop, on_step=lambda n, total: stop.set())
    assert not runner.path_for(ro.rollout_key(parent, req)).exists()
    for bad, match in ((ro.RolloutRequest(str(parent.path), 13, None), "steps 0-12"),
                       (ro.RolloutRequest(str(parent.path), 12, None), "ended at step 12"),
                       (ro.RolloutRequest(str(parent.path), 2, None, policy="oracle"), "unknown continuation"),
                       (ro.RolloutRequest(str(parent.path), 2, "  "), "empty action")):
        with pytest.raises(ro.RolloutError, match=match):
            runner.run(bad, ep=parent)
    outs = ro.run_rollouts([ro.RolloutRequest(str(parent.path) + ".missing", 1, None)], runner=runner)
    assert outs[0].rollout is None and "no trace" in outs[0].error


@pytest.mark.slow
def test_decision_values_pair_the_two_branches(parent, runner, tmp_path):
    rec = parent.steps[4]
    dropped = next(a.action for a in rec.swift_valid_ranked[1:] if a.action != rec.action)
    points = [dv.DecisionPoint("gate1_drop", str(parent.path), "swift", TASK, parent.header.variation, 5, rec.action,
                               dropped),
              dv.DecisionPoint("sage_pick", str(parent.path), "swift", TASK, parent.header.variation, 5, rec.action,
                               None)]
    values = dv.measure(points, horizon=3, out=runner.out)
    drop, same = values
    a = ro.read_rollout(Path(drop.with_path))
    b = ro.read_rollout(Path(drop.without_path))
    assert drop.with_first == rec.action and drop.without_first == dropped
    assert drop.value == max(0.0, a.final) - max(0.0, b.final)
    # Swift's own choice there is the recorded action: the "decision" changed nothing
    assert same.same and same.value is None and same.without_first == rec.action
    summary = dv.summarize(values, {TASK: "Short"})
    assert summary["gate1_drop"]["n"] == 1 and summary["gate1_drop"]["by_group"]["Short"]["n"] == 1
    assert summary["sage_pick"]["n"] == 0 and summary["sage_pick"]["same"] == 1


@pytest.mark.slow
def test_two_workers_give_the_same_rollouts_as_one(parent, tmp_path):
    reqs = [ro.RolloutRequest(str(parent.path), k, None, horizon=2) for k in (1, 6)]
    two = ro.run_rollouts(reqs, workers=2, out=tmp_path / "two")
    one = ro.run_rollouts(reqs, workers=1, out=tmp_path / "one")
    assert all(o.rollout is not None for o in two + one)
    assert [o.rollout.scores for o in two] == [o.rollout.scores for o in one]
    assert [read_episode(o.rollout.path).steps[-1].action for o in two] == \
        [read_episode(o.rollout.path).steps[-1].action for o in one]


@pytest.mark.slow
def test_an_evaluated_episode_makes_no_rollout(tmp_path):
    from agent_core.evaluate.runner import EpisodeRunner
    from agent_core.evaluate.spec import EvalSpec, Job, prepare_dir

    spec = EvalSpec(presets=["swift"], tasks=[TASK], variations=1, split="test", step_limit=6)
    jobs = spec.jobs()
    prepare_dir(tmp_path, spec, jobs)
    before = ro.STARTED
    runner = EpisodeRunner(spec, tmp_path)
    try:
        row = runner.run(Job("swift", TASK, jobs[0].variation))
    finally:
        runner.close()
    assert row["steps"] == 6 and ro.STARTED == before


AGENT_PACKAGES = ("controller.py", "control", "sage", "srm", "amm", "swift", "episode", "llm", "env.py", "run.py",
                  "evaluate/runner.py", "evaluate/local.py", "evaluate/ray_runner.py")


@pytest.mark.fast
def test_no_part_of_the_agent_can_reach_a_rollout():
    """Planning with the simulator is outside the protocol: the agent's code never imports the rollout module."""
    root = Path(ro.__file__).parent
    files = [p for name in AGENT_PACKAGES for p in ((root / name).rglob("*.py") if (root / name).is_dir()
                                                     else [root / name])]
    assert len(files) > 30
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [f"{node.module or ''}:{','.join(a.name for a in node.names)}"]
                     if isinstance(node, ast.ImportFrom) else [])
            assert not any("rollout" in n or "decision_value" in n for n in names), f"{path} imports {names}"


def _rec(step, action, system="swift", decisions=(), gate1=(), trigger=None, ranked=()):
    from agent_core.trace import StepRecord, SwiftCandidate

    return StepRecord(step=step, action=action, system=system, observation="ok", look="", inventory="", score=0,
                      reward=0, moves=step, done=False, failed=False, room="kitchen", decisions=list(decisions),
                      gate1=list(gate1), trigger=trigger,
                      swift_valid_ranked=[SwiftCandidate(a, 0.0, True) for a in ranked])


@pytest.mark.fast
def test_decision_points_name_what_each_mechanism_changed(tmp_path):
    from agent_core.decisions import FocusReview, T1Retry
    from agent_core.trace import Episode, EpisodeHeader, Trigger

    steps = [
        _rec(1, "open door", "sage", [SagePick(action="open door", option=2, of=5)], ranked=["go to hallway"]),
        _rec(2, "go to hallway", "swift", gate1=[Gate1Decision("sage", "eat door", "DROP", reason="NO_VERB"),
                                                Gate1Decision("sage", "eat door", "DROP", reason="NO_VERB")]),
        _rec(3, "focus on water", "sage", [FocusReview(picked="focus on water", option=1, of=2)],
             trigger=Trigger("critical", "a focus", {"swift_action": "focus on ice"})),
        _rec(4, "look at stove", "swift", [T1Retry(retry="look at stove", replaced="look at sink", valid=True)]),
        _rec(5, "look at sink", "swift", [T1Retry(retry="look at oven", replaced="look at sink", valid=True,
                                                  outside_top_k=5)]),
    ]
    ep = Episode(header=EpisodeHeader(task="boil", task_index=0, variation=1, split="test", task_description="",
                                      config={"preset": "full"}, models={}, run_id="x"), steps=steps, path=tmp_path / "x.jsonl",
                 summary=None)
    pts = dv.decision_points(ep)
    assert [(p.mechanism, p.step, p.played, p.instead) for p in pts] == [
        ("sage_pick", 1, "open door", None), ("gate1_drop", 2, "go to hallway", "eat door"),
        ("focus_review", 3, "focus on water", "focus on ice"), ("t1_retry", 4, "look at stove", "look at sink")]
    assert pts[0].requests()[0].step == 0 and pts[0].preset == "full"
    assert [p.mechanism for p in dv.decision_points(ep, mechanisms=("gate1_drop",))] == ["gate1_drop"]
