"""Evaluation at scale (agent_core.evaluate): the real Swift, real ScienceWorld JVMs (one per worker, a fresh
one per episode), the real embedded SmolLM2-135M as Sage and Critic, on 2 tasks x 2 test variations x 2
presets at a 10-step limit. Run twice it gives the same metrics; killed with SIGKILL mid-run it resumes
without redoing finished episodes; on a local Ray cluster (started by the test, inside a network namespace
with only loopback) it gives identical results. Bad input is refused before any JVM starts."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_core.evaluate import comparable
from agent_core.evaluate.metrics import aggregate

from tests.conftest import EVAL_ARGS as ARGS, EVAL_ENV as ENV, run_evaluation as _evaluate

ROOT = Path(__file__).resolve().parent.parent


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def _finished(out: Path) -> dict[str, str]:
    """Finished traces (with a summary line) -> a hash of their bytes."""
    found = {}
    for p in (out / "traces").rglob("*.jsonl"):
        text = p.read_text()
        if '"kind": "summary"' in text:
            found[str(p.relative_to(out))] = hashlib.sha256(text.encode()).hexdigest()
    return found


@pytest.fixture(scope="module")
def first_eval(small_evaluation) -> Path:
    return small_evaluation


# ------------------------------------------------------------------ metrics, without a JVM

def _row(preset, task, final, steps, success=None):
    return {"preset": preset, "task": task, "task_index": {"a": 0, "b": 1}[task], "variation": 0,
            "final": max(0.0, final), "raw_final": final, "success": final >= 100 if success is None else success,
            "steps": steps, "reason": "success" if final >= 100 else "failure", "error": None, "trace": "",
            "activity": {"critic_calls": 1 if task == "a" else 0}, "seconds": 1.0}


def test_metrics_are_per_task_then_macro_averaged():
    rows = [_row("p", "a", 100, 10), _row("p", "a", -100, 3), _row("p", "a", 50, 20),  # task a: Final 50
            _row("p", "b", 100, 30)]  # task b: Final 100
    m = aggregate(rows, {"a": 12.0, "b": 60.0})["p"]
    assert m["final"] == pytest.approx(75.0)  # (50 + 100) / 2, the -100 counted as 0; not the episode mean 62.5
    assert m["success"] == pytest.approx((1 / 3 + 1) / 2, abs=1e-4)
    assert m["steps_at_success"] == pytest.approx((10 + 30) / 2)  # per task first: a's 10, b's 30
    assert m["ended_negative"] == 1 and m["successes"] == 2
    assert set(m["groups"]) == {"Short", "Long"} and m["groups"]["Short"]["final"] == pytest.approx(50.0)
    assert m["activity"]["critic_calls"] == pytest.approx(0.75)


def test_a_report_over_presets_played_by_different_code_names_each_presets_revision():
    """Re-playing two presets after a fix mixes code revisions on purpose: the report must say which preset ran
    which code, not only that the revisions differ."""
    from agent_core.evaluate.report import provenance, provenance_markdown

    old, new = {"commit": "a" * 40, "modified": False}, {"commit": "b" * 40, "modified": False}
    rows = [dict(_row("baseline", t, 100, 5), code=old) for t in "ab"]
    rows += [dict(_row("srm", "a", 100, 5), code=new), dict(_row("srm", "b", 0, 30), code=old)]
    prov = provenance(rows, ["baseline", "srm"])
    assert prov["code"] == {"a" * 10: 3, "b" * 10: 1}
    assert prov["code_by_preset"] == {"baseline": {"a" * 10: 2}, "srm": {"b" * 10: 1, "a" * 10: 1}}
    text = "\n".join(provenance_markdown(prov))
    assert f"By preset: Baseline {'a' * 10} (2); +SRM {'b' * 10} (1), {'a' * 10} (1)." in text
    single = provenance([r for r in rows if r["preset"] == "baseline"], ["baseline"])
    assert "Warning" not in "\n".join(provenance_markdown(single))


# ------------------------------------------------------------------ bad input: clear errors, no JVM

@pytest.mark.parametrize("argv, message", [
    (["--presets", "baseline", "nope"], "unknown preset(s) 'nope'"),
    (["--tasks", "boiling-water"], "unknown task 'boiling-water'"),
    (["--tasks", "boil", "--variations", "0,21"], "variation 0 is not a test variation of task 'boil'"),
    (["--variations", "x"], "give a count (10) or a comma list"),
    (["--set", "srm.no_such_field=3"], "unknown config field"),
])
def test_bad_input_is_refused_before_any_jvm(argv, message, tmp_path, monkeypatch, capsys):
    from agent_core import env as env_mod
    from agent_core.evaluate.__main__ import main

    monkeypatch.setattr(env_mod.ScienceWorld, "_start", lambda self: pytest.fail("a JVM was started"))
    assert main(["--out", str(tmp_path / "e"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "e").exists()  # nothing was created either


def test_a_directory_of_another_evaluation_or_other_files_is_refused(tmp_path, monkeypatch, capsys):
    from agent_core import env as env_mod
    from agent_core.evaluate.__main__ import main
    from agent_core.evaluate.spec import EvalSpec, prepare_dir

    monkeypatch.setattr(env_mod.ScienceWorld, "_start", lambda self: pytest.fail("a JVM was started"))
    spec = EvalSpec(presets=["baseline"], tasks=["17"], variations=1, step_limit=6)
    prepare_dir(tmp_path / "e", spec, spec.jobs())
    assert main(["--out", str(tmp_path / "e"), "--tasks", "17", "--variations", "1", "--max-steps", "7"]) == 2
    err = capsys.readouterr().err
    assert "holds another evaluation's results" in err and "step_limit was 6, now 7" in err
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert main(["--out", str(tmp_path / "other"), "--tasks", "17"]) == 2
    assert "is not an evaluation directory" in capsys.readouterr().err
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


# ------------------------------------------------------------------ real episodes

@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.xdist_group("small_evaluation")
@pytest.mark.slow
def test_small_evaluation_results_and_report(first_eval):
    res = _results(first_eval)
    assert res["episodes_asked"] == 8 and res["episodes_done"] == 8 and not res["missing"]
    assert res["preset_order"] == ["baseline", "srm"]
    for p in ("baseline", "srm"):
        m = res["presets"][p]
        assert m["episodes"] == 4 and m["tasks"] == 2 and not m["errors"]
        assert set(m["per_task"]) == {"lifespan-longest-lived", "boil"}
        assert 0 <= m["final"] <= 100 and m["activity"]["system1_calls"] > 0
        assert m["per_task"]["lifespan-longest-lived"]["success"] == 1.0  # Swift solves it in 2 steps
    # Gate-1 checks every action in srm only; Sage is called in both (boil gets stuck)
    assert res["presets"]["baseline"]["activity"]["gate1_checks"] == 0
    assert res["presets"]["srm"]["activity"]["gate1_checks"] >= 5
    assert res["presets"]["baseline"]["activity"]["system2_calls"] > 0
    assert all(e["steps"] <= 10 for e in res["episodes"])
    traces = sorted(p.relative_to(first_eval).as_posix() for p in (first_eval / "traces").rglob("*.jsonl"))
    assert "traces/srm/lifespan-longest-lived-v93-srm.jsonl" in traces and len(traces) == 8
    report = (first_eval / "report.md").read_text()
    assert "## Table 1" in report and "| Baseline |" in report and "| +SRM |" in report
    assert "## Task groups" in report and "## Mechanism activity" in report and "lifespan-longest-lived" in report


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.xdist_group("small_evaluation")
@pytest.mark.slow
def test_rerun_gives_the_same_metrics_and_resumes_after_sigkill(first_eval, tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "agent_core.evaluate", "--out", str(out), *ARGS]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 600
    try:
        while len(_finished(out)) < 3:  # kill it with some episodes finished and (likely) one half-written
            assert proc.poll() is None, "the evaluation ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker processes and their JVMs too
        proc.wait()
    before = _finished(out)
    partial = [p for p in (out / "traces").rglob("*.jsonl") if str(p.relative_to(out)) not in before]
    assert 3 <= len(before) < 8 and not (out / "results.json").exists()
    r = _evaluate(out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(before)} already finished" in r.stdout
    after = _finished(out)
    assert len(after) == 8
    for name, digest in before.items():
        assert after[name] == digest, f"{name} was played again"
    for p in partial:  # the half-written trace was kept aside and its episode played again
        assert p.with_name(p.name + ".interrupted-1").exists() and str(p.relative_to(out)) in after
    assert comparable(_results(out)) == comparable(_results(first_eval))
    # a third run has nothing to do and leaves every trace alone
    r = _evaluate(out)
    assert r.returncode == 0 and "8 already finished, 0 to play" in r.stdout
    assert _finished(out) == after


def _unshare_ok() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up && true"], capture_output=True).returncode == 0


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.server
@pytest.mark.xdist_group("small_evaluation")
@pytest.mark.slow
def test_ray_local_cluster_gives_identical_results(first_eval, tmp_path):
    if not _unshare_ok():
        msg = "Ray runs here only in a network namespace (unshare -n, as root)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    out = tmp_path / "ray"
    inner = " ".join([sys.executable, "-m", "agent_core.evaluate", "--out", str(out), *ARGS, "--backend", "ray",
                      "--workers", "2"])
    r = subprocess.run(["unshare", "-n", "sh", "-c", f"ip link set lo up && exec {inner}"], cwd=ROOT,
                       env={**ENV, "RAY_AUTH_MODE": "disabled"}, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 ray worker(s)" in r.stdout
    assert comparable(_results(out)) == comparable(_results(first_eval))
    assert _results(out)["backend"] == "ray"


def test_a_worker_stops_when_its_evaluation_is_gone():
    """Killing `python -m agent_core.evaluate` must not leave its worker processes playing episodes (they did, for
    an hour, on the cores the tests needed): a worker whose parent changes exits within seconds."""
    code = ("import os, time\nfrom agent_core.evaluate.local import _exit_with_parent\n"
            "_exit_with_parent(os.getppid() + 1 if os.getppid() != 1 else 2)\ntime.sleep(30)\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert r.returncode == 3 and time.monotonic() - t0 < 15
    same = subprocess.run([sys.executable, "-c", code.replace("os.getppid() + 1 if os.getppid() != 1 else 2",
                                                              "os.getppid()").replace("30", "3")],
                          cwd=Path(__file__).resolve().parent.parent, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert same.returncode == 0  # its parent is alive: it finishes its work


def test_an_episode_starts_from_the_listing_its_pair_recorded(tmp_path, monkeypatch):
    """ScienceWorld now and then lists a task's wood cups in another order; an evaluation's episode loads into the
    starting look another preset's episode of the same task-variation recorded, so a pair starts alike."""
    from agent_core.evaluate.runner import EpisodeRunner, paired_start
    from agent_core.evaluate.spec import EvalSpec, Job

    def header(preset: str, task: str, v: int, look: str) -> None:
        p = tmp_path / "traces" / preset / f"{task}-v{v}-{preset}.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"kind": "header", "initial_look": look}) + "\n")

    job = Job("srm", "chemistry-mix", 3)
    assert paired_start(tmp_path, job) is None  # the first of its pairs takes the world as it comes
    header("srm", "chemistry-mix", 3, "its own")  # its own earlier try is not a pair
    header("baseline", "chemistry-mix-paint-secondary-color", 3, "another task")  # a longer name, same prefix
    header("baseline", "chemistry-mix", 30, "another variation")
    assert paired_start(tmp_path, job) is None
    (tmp_path / "traces" / "amm").mkdir()
    (tmp_path / "traces" / "amm" / "chemistry-mix-v3-amm.jsonl").write_text("{half a line")
    header("baseline", "chemistry-mix", 3, "the cups: red, yellow, blue")
    assert paired_start(tmp_path, job) == "the cups: red, yellow, blue"

    started = {}

    class Agent:  # what EpisodeRunner.run asks of an agent
        cfg = type("C", (), {"amm": type("A", (), {"enabled": False})()})()

        def start(self, task, variation, split=None, run_id=None, look=None):
            started.update(task=task, look=look)
            raise RuntimeError("stop here")

        def finish(self, *a, **k):
            return None

    runner = EpisodeRunner(EvalSpec(presets=["srm"]), tmp_path)
    monkeypatch.setattr(runner, "agent", lambda name: Agent())
    row = runner.run(job)
    assert started == {"task": "chemistry-mix", "look": "the cups: red, yellow, blue"} and row["reason"] == "error"
