"""Regression tests for the defects issue 14 found by reading the code: each fails on the old code."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_core.config import apply_overrides, preset
from agent_core.controller import Agent, ScriptedSwift
from agent_core.env import catalog
from agent_core.llm import ChatResult, LLMBackend
from agent_core.sage import parse_actions

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.model
def test_run_cli_reports_a_failed_start_cleanly(tmp_path):
    """`start()` failing (here: ScienceWorld's jar cannot be found) was an AttributeError traceback."""
    r = subprocess.run([sys.executable, "-m", "agent_core.run", "--task", "boil", "--variation", "21",
                        "--set", f"env.jar_path={tmp_path / 'missing.jar'}", "--set", "controller.sage_enabled=false",
                        "--runs-dir", str(tmp_path / "runs"), "--quiet"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "AttributeError" not in r.stderr and "Traceback" not in r.stderr
    assert "error:" in r.stderr and "no episode was recorded" in r.stderr


def test_plan_and_note_are_dropped_only_as_headings():
    text = "Commands:\nPlant the seed in the pot\nNote: water it after\nnotebook\nPlan - first the seed\nplant seed"
    actions, _ = parse_actions(text, 5)
    assert actions == ["Plant the seed in the pot", "notebook", "plant seed"]


class _FakeLlama:
    """Stands in for a llama.cpp model: streams `n` tokens, `dt` seconds apart."""

    def __init__(self):
        self._ctx = None
        self.n_tokens = 0

    def reset(self):
        self.n_tokens = 0

    def create_chat_completion(self, messages, max_tokens, **kw):
        def gen():
            for i in range(max_tokens):
                time.sleep(0.2)
                yield {"choices": [{"delta": {"content": f"t{i} "}, "finish_reason": None}]}
            yield {"choices": [{"delta": {}, "finish_reason": "stop"}]}
        return gen()


def test_a_call_waiting_for_another_sessions_call_does_not_time_out():
    """The clock used to start before the model's lock: a call queued behind a long one timed out."""
    from agent_core.llm.embedded import EmbeddedBackend

    fake = _FakeLlama()
    long_call, short_call = EmbeddedBackend("smollm2-135m", timeout=30), EmbeddedBackend("smollm2-135m", timeout=1.5)
    long_call._llm = short_call._llm = fake
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("long", long_call.chat("a long one", max_tokens=12)))
    t.start()
    time.sleep(0.1)
    t0 = time.perf_counter()
    res = short_call.chat("a short one", max_tokens=3)  # waits ~2.3 s for the model, then takes ~0.6 s
    assert time.perf_counter() - t0 > 1.5 and res.completion_tokens == 3 and res.latency_s < 1.5
    t.join()
    assert out["long"].completion_tokens == 12


@pytest.mark.model
def test_one_loaded_model_whatever_the_thread_count():
    from agent_core.llm import embedded

    a = embedded.EmbeddedBackend("smollm2-135m", n_threads=1)
    b = embedded.EmbeddedBackend("smollm2-135m", n_threads=2)
    assert a._load() is b._load()
    # (other tests in this process may hold the model at another context size: that is another copy by design)
    assert len([k for k in embedded._LOADED if k == ("smollm2-135m", a.n_ctx)]) == 1
    assert b.chat("Say hi.", max_tokens=4).completion_tokens > 0 and a.chat("Say hi.", max_tokens=4).text


@pytest.mark.model
def test_open_stream_honours_a_different_config(tmp_path):
    from memory_store import MemoryConfig, open_stream

    base = MemoryConfig(persist_dir=str(tmp_path / "m"))
    other = MemoryConfig(persist_dir=str(tmp_path / "m"), weight_recency=0.0)
    s1, s2, s3 = open_stream(base), open_stream(other), open_stream(MemoryConfig(persist_dir=str(tmp_path / "m")))
    assert s1 is s3 and s1 is not s2
    assert s2.config.weight_recency == 0.0 and s1.config.weight_recency == 1.0
    s1.add("the stove is in the kitchen", now=1.0, importance=5)
    s2.refresh()
    assert len(s2) == 1  # one store, two views


class _Crashing(LLMBackend):
    """A backend whose library raises something that is not an LLMError (as llama.cpp's RuntimeError)."""

    name, model = "crashing", "c"

    def chat(self, messages, **kw) -> ChatResult:
        raise RuntimeError("llama_decode returned -3")


@pytest.mark.jvm
@pytest.mark.parametrize("name", ["baseline", "srm"])
def test_a_runtime_error_in_the_backend_falls_back_instead_of_failing_the_step(name, tmp_path):
    cfg = apply_overrides(preset(name), {"env.step_limit": 7})
    # its own JVM: the session's shared one would keep this agent's step limit
    agent = Agent(cfg, ScriptedSwift(lambda _s, _v: "fly to the moon"), _Crashing(), runs_dir=tmp_path)
    agent.start("boil", catalog().get("boil").test[0], split="test")
    records = [agent.step() for _ in range(7)]  # the old code raised out of step() at the first Sage call
    calls = [c for r in records for c in r.llm_calls]
    assert calls and all("RuntimeError in the crashing backend: llama_decode returned -3" in c.error for c in calls)
    assert any("falling back to Swift's action" in n for r in records for n in r.notes)
    agent.close()
