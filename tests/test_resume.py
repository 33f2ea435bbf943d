"""Crash and resume (python -m agent_core.run --resume): a real episode (the shipped Swift, a real JVM) is
killed with SIGKILL mid-run and resumed: no finished step is lost or changed, the trace stays readable, the
resumed run plays on exactly as an uninterrupted one, and the summary records the resume."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_core.trace import read_episode

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
       "PYTHONPATH": str(ROOT)}
EPISODE = ["--task", "boil", "--variation", "21", "--split", "test", "--max-steps", "14",
           "--set", "controller.sage_enabled=false"]  # Swift alone: deterministic, no model server needed
pytestmark = [pytest.mark.slow, pytest.mark.jvm, pytest.mark.model, pytest.mark.xdist_group("test_resume")]


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent_core.run", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def _steps(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n") if line.startswith(b'{"kind": "step"')]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("ref")
    r = _run(*EPISODE, "--runs-dir", str(runs), "--quiet")
    assert r.returncode == 0, r.stderr
    return next(runs.glob("*.jsonl"))


def test_sigkill_then_resume_loses_nothing_and_plays_on_identically(reference, tmp_path):
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "agent_core.run", *EPISODE, "--runs-dir", str(runs)], cwd=ROOT,
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    try:
        while True:
            traces = list(runs.glob("*.jsonl"))
            if traces and len(_steps(traces[0])) >= 5:
                break
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before it could be killed"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the agent and its JVM, mid-step
        proc.wait()
    trace = traces[0]
    before = _steps(trace)
    killed = read_episode(trace)
    assert killed.summary is None and len(killed.steps) == len(before) < 14
    t0 = time.perf_counter()
    r = _run("--resume", str(trace))
    resume_s = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"resumed {trace} after step {len(before)}" in r.stdout
    after = _steps(trace)
    assert after[: len(before)] == before  # every finished step kept, byte for byte
    ep = read_episode(trace)
    assert ep.summary is not None and ep.summary.steps == 14 and ep.truncated_tail is None
    assert [x["at_step"] for x in ep.summary.resumed] == [len(before)]
    assert ep.summary.resumed[0]["previous_end"] == "killed (no summary)"
    first_new = ep.steps[len(before)]
    assert any(e.kind == "resumed" for e in first_new.env_events)
    ref = read_episode(reference)
    assert [s.action for s in ep.steps] == [s.action for s in ref.steps]  # the same continuation as no crash
    assert ep.summary.final_score == ref.summary.final_score
    print(f"resume of {len(before)} steps took {resume_s:.1f} s (process start and model load included)")


def test_resume_refuses_a_finished_episode_and_a_diverging_record(reference, tmp_path):
    r = _run("--resume", str(reference))
    assert r.returncode == 2 and "already ended" in r.stderr and "nothing to resume" in r.stderr
    lines = reference.read_text().splitlines()
    step3 = json.loads(lines[3])
    step3["observation"] = "The stove explodes."
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], lines[1], lines[2], json.dumps(step3), lines[4]]) + "\n")
    original = bad.read_bytes()
    r = _run("--resume", str(bad))
    assert r.returncode == 1 and "replay diverged at step 3" in r.stderr
    assert bad.read_bytes() == original  # a failed resume changes no file
    r = _run("--resume", str(tmp_path / "missing.jsonl"))
    assert r.returncode == 2 and "no trace at" in r.stderr


@pytest.mark.page
def test_run_page_lists_an_interrupted_trace_and_resumes_it(reference, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from agent_core.controller import Agent, ScriptedSwift
    from agent_core.llm import ScriptedBackend

    runs = tmp_path / "runs"
    runs.mkdir()
    cut = runs / reference.name
    lines = reference.read_text().splitlines()
    cut.write_text("\n".join(lines[:6]) + "\n" + lines[6][:40])  # header + 5 steps + a half-written line
    made = []

    def factory(cfg):
        made.append(Agent(cfg, ScriptedSwift(["look around"] * 20), ScriptedBackend([]), runs_dir=runs))
        return made[-1]

    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    at = AppTest.from_file(str(ROOT / "pages" / "0_Run.py"), default_timeout=120)
    at.session_state["run_source"] = "Live run"  # not the first-visit example
    at.session_state["agent_factory"] = factory
    at.run()
    at.radio(key="run_source").set_value("Recorded episode").run()
    box = at.selectbox(key="run_trace")
    assert box.value == str(cut) and "unfinished (resumable)" in box.format_func(box.value)
    assert any("did not finish" in w.value for w in at.warning)
    at.button(key="run_resume").click().run()
    assert not at.exception, at.exception
    assert at.radio(key="run_source").value == "Live run" and len(made) == 1
    agent = made[0]
    assert len(agent.records) == 5 and agent.trace_path == cut
    at.button(key="run_step").click().run()
    assert not at.exception and len(agent.records) == 6
    agent.close()
    ep = read_episode(cut)
    assert len(ep.steps) == 6 and ep.truncated_tail is None and ep.summary.resumed[0]["at_step"] == 5
    assert ep.summary.resumed[0]["dropped_half_written_line"] is True
