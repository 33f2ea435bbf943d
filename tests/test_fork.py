"""Forking a recorded episode (Agent.fork, python -m agent_core.fork): a fresh JVM replays the recorded
actions, checked against the recorded observations; the fork records its parent and fork step. With the
real Swift and the same preset, a fork from step K plays on exactly as the parent did (same state, same
decisions); under another preset it is a new trace of its own."""
from __future__ import annotations

import json

import pytest

from agent_core.config import apply_overrides, preset
from agent_core.controller import Agent, ReplayError, load_swift
from agent_core.env import catalog
from agent_core.llm import ScriptedBackend
from agent_core.trace import read_episode

pytestmark = [pytest.mark.jvm, pytest.mark.model, pytest.mark.xdist_group("test_fork")]

TASK = "boil"
SWIFT_ONLY = {"controller.sage_enabled": False, "srm.critic_enabled": False, "env.step_limit": 9}


@pytest.fixture(scope="module")
def swift():
    return load_swift(preset("baseline"))


def _agent(name, swift, runs):
    cfg = apply_overrides(preset(name), SWIFT_ONLY)
    return Agent(cfg, swift, ScriptedBackend([]), runs_dir=runs)  # no LLM call may happen


@pytest.fixture(scope="module")
def parent(swift, tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    agent = _agent("baseline", swift, runs)
    agent.start(TASK, catalog().get(TASK).test[0], split="test")
    agent.run()
    path = agent.trace_path
    agent.close()
    ep = read_episode(path)
    assert len(ep.steps) == 9 and ep.summary is not None
    return ep


@pytest.mark.slow
def test_fork_with_the_same_preset_replays_to_the_same_state_and_plays_on_identically(parent, swift, tmp_path):
    agent = _agent("baseline", swift, tmp_path)
    header = agent.fork(parent, 4)
    assert header.parent["trace"] == str(parent.path) and header.parent["step"] == 4
    assert header.parent["run_id"] == parent.header.run_id and header.parent["preset"] == "baseline"
    assert len(agent.records) == 4 and all(r.replayed for r in agent.records)
    # the restored state is the recorded one: room, inventory, score and what Swift reads
    last = parent.steps[3]
    assert (agent.last.look, agent.last.inventory, agent.last.score) == (last.look, last.inventory, last.score)
    assert agent.state.swift_state.time == sum(1 for r in parent.steps[:4] if r.action != "look around")
    agent.run()
    fork = read_episode(agent.trace_path)
    agent.close()
    assert fork.header.parent["step"] == 4 and fork.summary is not None
    assert [r.action for r in fork.steps] == [r.action for r in parent.steps]
    assert [r.observation for r in fork.steps] == [r.observation for r in parent.steps]
    assert [r.replayed for r in fork.steps] == [True] * 4 + [False] * 5


@pytest.mark.slow
def test_fork_under_another_preset_is_its_own_run(parent, swift, tmp_path):
    agent = _agent("srm", swift, tmp_path)
    agent.fork(parent, 3)
    agent.run()
    fork = read_episode(agent.trace_path)
    agent.close()
    assert fork.header.config["preset"] == "srm" and fork.header.parent["preset"] == "baseline"
    assert not any(r.gate1 for r in fork.steps[:3])  # replayed as recorded: Baseline had no Gate-1
    assert all(r.gate1 for r in fork.steps[3:])  # from step 4 on, SRM's Gate-1 checks every action
    assert fork.path != parent.path and read_episode(parent.path).steps == parent.steps  # the parent is untouched


def test_a_diverging_replay_and_a_bad_step_are_clear_errors(parent, swift, tmp_path):
    lines = parent.path.read_text().splitlines()
    step2 = json.loads(lines[2])
    assert step2["kind"] == "step" and step2["step"] == 2
    step2["observation"] = "Something else happened."
    lines[2] = json.dumps(step2)
    bad = tmp_path / "tampered.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    agent = _agent("baseline", swift, tmp_path / "runs")
    with pytest.raises(ReplayError, match="replay diverged at step 2"):
        agent.fork(read_episode(bad), 5)
    broken = read_episode(agent.trace_path)
    assert broken.summary.reason == "error" and "diverged at step 2" in broken.summary.error
    with pytest.raises(ReplayError, match="steps 0-9"):
        agent.fork(parent, 12)
    with pytest.raises(ReplayError, match="ended at step 9"):
        agent.fork(parent, 9)
    agent.close()


def test_fork_cli_refuses_a_missing_trace_and_a_step_out_of_range(parent, capsys, tmp_path):
    from agent_core.fork import main

    assert main([str(tmp_path / "nope.jsonl"), "--step", "1"]) == 2
    assert "no trace at" in capsys.readouterr().err
    assert main([str(parent.path), "--step", "40"]) == 2
    assert "has steps 0-9" in capsys.readouterr().err
