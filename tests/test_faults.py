"""Fault drills on the Run page (AppTest, the product path: the shipped Swift, a real ScienceWorld JVM and an
OpenAI-compatible backend) against real servers: llama.cpp's server killed in the middle of a Sage call, a
server that answers too slowly, one that answers garbage. Each time the page says what happened, the step is
recorded with the error, and the run goes on with Swift's action. And a model call in flight stops when it is
cancelled (what the page's Pause does), for the embedded model and for a server."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from agent_core.llm import LLMCancelled
from agent_core.trace import read_episode
from tests.llm_server import BadServer, LlamaServer
from tests.test_llm import _client_connections

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
STEPS = 8


def _run_page(monkeypatch, runs: Path, base_url: str, model: str, timeout: int) -> AppTest:
    """The Run page with the openai backend at base_url; Reset, then Run N steps."""
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    at = AppTest.from_file(str(ROOT / "pages" / "0_Run.py"), default_timeout=600)
    at.session_state["run_source"] = "Live run"  # not the first-visit example
    at.run()
    at.selectbox(key="run_backend").set_value("openai").run()
    at.text_input(key="run_base_url").input(base_url).run()
    at.text_input(key="run_llm_model").input(model).run()
    at.number_input(key="run_llm_timeout").set_value(timeout).run()
    at.button(key="run_reset").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    at.number_input(key="run_n_steps").set_value(STEPS).run()
    at.button(key="run_run_n").click().run()
    assert not at.exception, at.exception
    return at


def _recorded(runs: Path):
    return read_episode(next(runs.glob("*.jsonl")))


def _check_fallback(at, runs: Path, error_part: str):
    agent = at.session_state["run_agent"]
    try:
        ep = _recorded(runs)
        assert len(ep.steps) == STEPS  # the run went on
        failed = [r for r in ep.steps if any(c.error for c in r.llm_calls)]
        assert failed, "no Sage call failed"
        assert all(error_part in c.error for r in failed for c in r.llm_calls if c.error)
        assert all(r.system == "swift" or r.mappings for r in failed)  # Swift's action (or a mapped pick) ran
        assert any("falling back to Swift's action" in n for r in failed for n in r.notes)
        # the page says so: the failed steps are marked in the step list, the last one's error is spelled out
        marked = {int(e.label.split(" ")[1]) for e in at.expander if e.label.startswith("Step ") and "LLM error" in e.label}
        assert {r.step for r in failed} <= marked
        if failed[-1].step == STEPS:
            assert any(error_part in e.value for e in at.error)
        return ep
    finally:
        agent.close()


@pytest.mark.page
@pytest.mark.server
@pytest.mark.jvm
@pytest.mark.model
def test_server_killed_mid_call(monkeypatch, tmp_path):
    srv = LlamaServer()
    killed = threading.Event()

    def killer():  # once a request is on the wire, the server goes away mid-answer
        while not killed.is_set():
            if _client_connections(srv.port) > 0:
                time.sleep(0.05)
                srv.kill()
                killed.set()
            time.sleep(0.005)

    threading.Thread(target=killer, daemon=True).start()
    try:
        at = _run_page(monkeypatch, tmp_path / "runs", srv.base_url, "smollm2", 60)
    finally:
        killed.set()
        srv.stop()
    assert killed.is_set()
    _check_fallback(at, tmp_path / "runs", "cannot reach the LLM server")


@pytest.mark.page
@pytest.mark.jvm
@pytest.mark.model
def test_slow_server_times_out_and_the_run_goes_on(monkeypatch, tmp_path):
    srv = BadServer()
    srv.mode, srv.delay = "slow", 30.0
    try:
        at = _run_page(monkeypatch, tmp_path / "runs", srv.base_url, "bad", 5)
    finally:
        srv.stop()
    ep = _check_fallback(at, tmp_path / "runs", "within 5 s")
    for r in ep.steps:  # a step never waited for the slow answer (5 s per attempt, 3 attempts, not 30 s)
        if r.llm_calls:
            assert r.timings.get("sage", 0.0) < srv.delay, r.timings


@pytest.mark.page
@pytest.mark.jvm
@pytest.mark.model
def test_garbage_answers_are_recorded_and_swift_acts(monkeypatch, tmp_path):
    srv = BadServer()
    srv.mode = "garbage"
    try:
        at = _run_page(monkeypatch, tmp_path / "runs", srv.base_url, "bad", 30)
    finally:
        srv.stop()
    agent = at.session_state["run_agent"]
    try:
        ep = _recorded(tmp_path / "runs")
        assert len(ep.steps) == STEPS
        sage = [r for r in ep.steps if r.llm_calls]
        assert sage and all(not c.error for r in sage for c in r.llm_calls)  # answers came, unusable
        notes = [n for r in sage for n in r.notes]
        assert any("no Q labels" in n or "no option number or command" in n for n in notes), notes
        valid_now = [r for r in sage if r.system == "sage"]  # a pick that ran was a listed, valid option
        assert all(r.action_valid is not False for r in valid_now)
    finally:
        agent.close()


@pytest.mark.model
def test_a_call_in_flight_stops_when_cancelled():
    """What Pause does: the embedded model stops within a token or two, a server call is given up at once."""
    from agent_core.llm.embedded import EmbeddedBackend
    from agent_core.llm.openai_compat import OpenAICompatBackend

    srv = BadServer()
    srv.mode, srv.delay = "slow", 30.0
    try:
        for be in (EmbeddedBackend("smollm2-135m", n_threads=1, timeout=120),
                   OpenAICompatBackend(srv.base_url, model="bad", timeout=60, max_retries=0)):
            cancel = threading.Event()
            threading.Timer(1.0, cancel.set).start()
            t0 = time.perf_counter()
            with pytest.raises(LLMCancelled, match="cancelled"):
                be.chat("Write a very long story about a pot of water, in 40 chapters.", max_tokens=2000,
                        cancel=cancel)
            assert 0.9 < time.perf_counter() - t0 < 4.0, be.name
    finally:
        srv.stop()
