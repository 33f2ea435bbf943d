"""LLM backends, for real: llama.cpp's OpenAI-compatible server on 127.0.0.1 and in-process llama.cpp."""
from __future__ import annotations

import threading
import time

import pytest

from agent_core.config import LLMConfig
from agent_core.llm import (LLMConnectionError, LLMExhausted, LLMHTTPError, LLMMalformedReply, LLMTimeoutError,
                            ScriptedBackend, make_backend)
from agent_core.llm.openai_compat import OpenAICompatBackend
from agent_core.llm.embedded import CACHE_MAGIC
from tests.llm_server import BadServer, LlamaServer, free_port

PLAN_PROMPT = ("You are playing a text game about science. Task: boil water. You are in the kitchen. "
               "You see a stove, a sink, a metal pot and a cupboard. List, as short numbered steps, "
               "the actions you would take to boil the water. Be concise.")


@pytest.fixture(scope="module")
def llama_server():
    srv = LlamaServer()
    yield srv
    srv.stop()


@pytest.mark.server
@pytest.mark.model
@pytest.mark.xdist_group("llama_server")
def test_openai_backend_good_reply(llama_server):
    be = OpenAICompatBackend(llama_server.base_url, timeout=60, max_retries=0)
    assert be.resolve_model() == "smollm2"  # asked the server's /v1/models
    r = be.chat([{"role": "system", "content": "You are helpful."}, {"role": "user", "content": PLAN_PROMPT}],
                max_tokens=24, temperature=0.0)
    assert r.text.strip() and r.backend == "openai" and r.model
    assert r.prompt_tokens > 30 and 0 < r.completion_tokens <= 24 and r.latency_s > 0
    # stop strings are honoured by the server
    r2 = be.chat("Count from 1 to 20, separated by commas.", max_tokens=60, stop=["5"])
    assert "5" not in r2.text and "6" not in r2.text


@pytest.mark.server
@pytest.mark.model
@pytest.mark.xdist_group("llama_server")
def test_openai_backend_timeout(llama_server):
    be = OpenAICompatBackend(llama_server.base_url, model="smollm2", timeout=0.2, max_retries=0)
    t0 = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match="within 0.2 s"):
        be.chat(PLAN_PROMPT * 3, max_tokens=2000)
    assert time.perf_counter() - t0 < 5


def test_refused_connection_is_a_clear_error():
    be = OpenAICompatBackend(f"http://127.0.0.1:{free_port()}/v1", model="m", timeout=5, max_retries=1)
    with pytest.raises(LLMConnectionError, match="cannot reach the LLM server at http://127.0.0.1"):
        be.chat("hi", max_tokens=4)


def test_bad_base_url():
    with pytest.raises(ValueError, match="http://"):
        OpenAICompatBackend("localhost:8000/v1")


def _client_connections(port: int) -> int:
    """Established TCP connections to 127.0.0.1:port, read from /proc (no psutil here)."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "01" and int(cols[2].rsplit(":", 1)[1], 16) == port:  # remote end is the server
                n += 1
    return n


@pytest.mark.server
@pytest.mark.model
def test_server_killed_mid_run():
    srv = LlamaServer()
    try:
        import urllib.request
        with urllib.request.urlopen(f"{srv.base_url}/models", timeout=5) as r:  # alive; closes its connection
            assert r.status == 200
        be = OpenAICompatBackend(srv.base_url, model="smollm2", timeout=60, max_retries=1)
        errors: list[Exception] = []

        def long_call():
            try:
                be.chat(PLAN_PROMPT, max_tokens=1000)
            except Exception as e:  # noqa: BLE001 - the test inspects it
                errors.append(e)

        th = threading.Thread(target=long_call)
        th.start()
        # Kill once the request is on the wire, not after a fixed sleep: a fast machine finishes a
        # short generation within a second, and then there would be nothing left to interrupt.
        deadline = time.time() + 20
        while _client_connections(srv.port) == 0 and time.time() < deadline:
            time.sleep(0.005)
        assert _client_connections(srv.port) > 0, "the request never reached the server"
        time.sleep(0.05)
        srv.kill()
        th.join(60)
        assert not th.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], LLMConnectionError), errors
        with pytest.raises(LLMConnectionError):  # and later calls say the same, promptly
            be.chat("again?", max_tokens=4)
    finally:
        srv.stop()


@pytest.mark.parametrize("mode, exc, match", [
    ("empty", LLMMalformedReply, "empty reply"),
    ("nochoices", LLMMalformedReply, "no choices"),
    ("notjson", LLMMalformedReply, "malformed|no choices"),
    ("http500", LLMHTTPError, "HTTP 500"),
    ("http404", LLMHTTPError, "HTTP 404"),
])
def test_malformed_and_http_errors(mode, exc, match):
    srv = BadServer()
    try:
        srv.mode = mode
        be = OpenAICompatBackend(srv.base_url, timeout=5, max_retries=0)
        with pytest.raises(exc, match=match):
            be.chat("hi", max_tokens=4)
    finally:
        srv.stop()


@pytest.mark.model
def test_embedded_small_model_real_prompt():
    """A multi-token prompt: the build flags matter here (a native build dies with SIGILL)."""
    be = make_backend(LLMConfig(backend="embedded", embedded_model="smollm2-135m", n_ctx=2048, timeout_s=60))
    r = be.chat(PLAN_PROMPT, max_tokens=32)
    assert r.text.strip() and r.prompt_tokens > 30 and r.completion_tokens > 0
    assert r.backend == "embedded" and "SmolLM2" in r.model
    with pytest.raises(LLMTimeoutError):
        be.chat(PLAN_PROMPT, max_tokens=2000, timeout=0.05)


@pytest.mark.model
def test_a_new_episode_starts_from_an_empty_prompt_cache():
    """A prompt read over another call's cached prefix can be answered differently than one read whole, so an
    episode's first call must not depend on what the process asked before: new_episode empties the cache."""
    be = make_backend(LLMConfig(backend="embedded", embedded_model="smollm2-135m", n_ctx=2048, timeout_s=60))
    be.chat(PLAN_PROMPT, max_tokens=8)
    again = be.chat(PLAN_PROMPT + " Be brief.", max_tokens=8)
    assert int(again.extra["cached_tokens"]) > 30  # within an episode the shared prefix is reused
    assert again.extra["cache_state"] == "held"
    # another agent of the same model (one loaded model per process) begins an episode: this one's cache stays
    be.for_agent().new_episode()
    kept = be.chat(PLAN_PROMPT + " Be brief.", max_tokens=8)
    assert int(kept.extra["cached_tokens"]) > 30 and kept.extra["cache_state"] == "held"
    be.new_episode()  # this one's own new episode
    first = be.chat(PLAN_PROMPT + " Be brief.", max_tokens=8)
    assert int(first.extra["cached_tokens"]) == 0 and first.extra["cache_state"] == "empty"
    be.new_episode()
    scored = be.score(PLAN_PROMPT, ["look around", "open door"])
    assert scored.cached_tokens == 0
    make_backend(LLMConfig(backend="scripted"), script=["x"]).new_episode()  # no cache: nothing to do


OTHER_PROMPT = "Answer in one word: what colour is the sky on a clear day?"


@pytest.mark.model
def test_each_agent_keeps_its_own_prompt_cache_on_the_shared_model():
    """Two sessions, or an Ask question during a run, call one loaded model: an agent's answers and option scores
    are those it gets alone, to the last bit, whatever others asked in between (its cache is set aside and given
    back). Before, the other call's prompt was left in the cache and this agent read its next prompt over it."""
    from agent_core.llm import embedded

    shared = make_backend(LLMConfig(backend="embedded", embedded_model="smollm2-135m", n_ctx=2048, timeout_s=60))
    options = ["look around", "open door to kitchen", "pick up thermometer", "focus on water"]

    def play(me, others=()):
        me.new_episode()
        chats = [me.chat(PLAN_PROMPT, max_tokens=12)]
        for other in others:
            other.new_episode()
            other.chat(OTHER_PROMPT, max_tokens=6)
        chats.append(me.chat(PLAN_PROMPT + " Name the first room to visit.", max_tokens=12))
        for other in others:
            other.chat(OTHER_PROMPT + " And at night?", max_tokens=6)
        return chats, me.score(PLAN_PROMPT + " Name the first room to visit.", options)

    alone, alone_scores = play(shared.for_agent())
    mixed, mixed_scores = play(shared.for_agent(), others=(shared.for_agent(), shared))  # a student, an Ask question
    assert [c.text for c in mixed] == [c.text for c in alone]
    assert [c.extra["cached_tokens"] for c in mixed] == [c.extra["cached_tokens"] for c in alone]
    assert int(alone[1].extra["cached_tokens"]) > 30
    assert mixed_scores.logprobs == alone_scores.logprobs  # exactly: the same cells, the same numbers
    assert mixed_scores.cached_tokens == alone_scores.cached_tokens > 30
    assert [c.extra["cache_state"] for c in alone] + [alone_scores.cache_state] == ["empty", "held", "held"]
    assert [c.extra["cache_state"] for c in mixed] + [mixed_scores.cache_state] == ["empty", "restored", "restored"]

    # when the saved caches outgrow their room, the oldest is dropped and its agent's next call says so
    a, b, c = shared.for_agent(), shared.for_agent(), shared.for_agent()
    limit = embedded.SAVED_LIMIT_BYTES
    embedded.SAVED_LIMIT_BYTES = 1
    try:
        a.chat(PLAN_PROMPT, max_tokens=4)
        b.chat(OTHER_PROMPT, max_tokens=4)  # a's cache set aside
        c.chat(OTHER_PROMPT, max_tokens=4)  # b's set aside: a's dropped for room
    finally:
        embedded.SAVED_LIMIT_BYTES = limit
    late = a.chat(PLAN_PROMPT + " Be brief.", max_tokens=4)
    assert late.extra["cache_state"] == "lost" and int(late.extra["cached_tokens"]) == 0
    assert b.chat(OTHER_PROMPT + " Why?", max_tokens=4).extra["cache_state"] == "restored"
    scripted = make_backend(LLMConfig(backend="scripted"), script=["x"])
    assert scripted.for_agent() is scripted  # no cache: the backend itself


@pytest.mark.model
@pytest.mark.slow
def test_embedded_default_model_plans():
    be = make_backend(LLMConfig())  # the shipped default: Qwen2.5-Coder-1.5B
    r = be.chat(PLAN_PROMPT, max_tokens=80)
    text = r.text.lower()
    assert "Qwen" in r.model and r.completion_tokens > 10
    assert any(w in text for w in ("stove", "pot", "sink", "water"))


def test_every_failure_has_a_kind_for_the_step_record():
    from agent_core.llm import LLMCancelled, LLMError, failure_of
    cases = [(LLMTimeoutError("e", "m did not finish within 5 s"), "timeout"),
             (LLMConnectionError("openai", "refused"), "connection"), (LLMHTTPError("openai", "HTTP 500"), "http"),
             (LLMMalformedReply("openai", "empty reply"), "malformed"), (LLMCancelled("e", "cancelled after 2 s"),
                                                                       "cancelled"),
             (LLMExhausted("scripted", "no more outputs"), "exhausted"), (LLMError("e", "NaN scores"), "llm")]
    for exc, kind in cases:
        assert failure_of(exc, "x") == (str(exc), kind)
    assert failure_of(ValueError("bad state"), "embedded") == ("ValueError in the embedded backend: bad state", "crash")


def test_scripted_backend_and_factory():
    be = ScriptedBackend(["one", ValueError("boom"), "two END three"])
    assert be.chat("a").text == "one"
    with pytest.raises(Exception, match="boom"):
        be.chat("b")
    assert be.chat("c", stop=["END"]).text == "two "
    with pytest.raises(LLMExhausted):
        be.chat("d")
    assert len(be.calls) == 4
    assert ScriptedBackend(lambda p: p.upper()).generate("hi").endswith("HI")
    with pytest.raises(ValueError, match="unknown LLM backend"):
        make_backend(LLMConfig(backend="gpt"))
    with pytest.raises(ValueError, match="unknown embedded model"):
        make_backend(LLMConfig(backend="embedded", embedded_model="llama-70b"))


def test_embedded_threads_follow_the_idle_cores(monkeypatch):
    """llm.n_threads = 0 (the default): every core when nothing else runs, one fewer per busy core, never 0."""
    import os

    from agent_core.llm import embedded

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert embedded.auto_threads(busy=0.0) == 4
    assert embedded.auto_threads(busy=0.25) == 4  # a page redraw is not a busy core
    assert embedded.auto_threads(busy=0.9) == 3
    assert embedded.auto_threads(busy=2.0) == 2
    assert embedded.auto_threads(busy=7.0) == 1
    monkeypatch.setattr(embedded, "busy_cores", lambda window_s=0.15: None)  # no /proc/stat: all but one
    assert embedded.auto_threads() == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert embedded.auto_threads() == 1
    from agent_core.config import LLMConfig
    assert LLMConfig().n_threads == 0


def test_busy_cores_sees_a_busy_core():
    """The reading behind the choice: a process spinning on one core shows as about one busy core."""
    import multiprocessing as mp

    from agent_core.llm.embedded import busy_cores

    idle = busy_cores(0.3)
    if idle is None:
        pytest.skip("no /proc/stat on this system")
    stop = mp.Event()
    p = mp.Process(target=_spin, args=(stop,))
    p.start()
    try:
        busy = busy_cores(0.5)
    finally:
        stop.set()
        p.join()
    assert busy is not None and busy >= 0.7, (idle, busy)


def test_busy_cores_leaves_out_this_process():
    """A burst in this process (a page redraw in the app) is not another program's load: llama.cpp keeps its cores."""
    import threading
    import time as _time

    from agent_core.llm.embedded import busy_cores

    if busy_cores(0.1) is None:
        pytest.skip("no /proc/stat on this system")

    def spinning_reading() -> float:
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                sum(i * i for i in range(1000))

        th = threading.Thread(target=spin)
        th.start()
        try:
            _time.sleep(0.1)
            return busy_cores(0.5)
        finally:
            stop.set()
            th.join()

    # other programs (another pytest-xdist worker, a second test run) load the machine too: compare with the
    # reading just before and after, and take the best of three tries; a spin counted as load adds a whole core
    # to every try
    tries = []
    for _ in range(3):
        before = busy_cores(0.5)
        busy = spinning_reading()
        after = busy_cores(0.5)
        tries.append((before, busy, after))
        if busy < max(before, after) + 0.5:
            break
    else:
        pytest.fail(f"this process's own spinning counted as other programs' load: (before, during, after) {tries}")


def _spin(stop) -> None:
    while not stop.is_set():
        pass


def test_the_seed_goes_with_every_request_to_a_server():
    srv = BadServer()
    try:
        srv.mode = "garbage"  # any answer: the request is what is checked
        be = OpenAICompatBackend(srv.base_url, timeout=5, max_retries=0, seed=7)
        be.chat("hi", max_tokens=4)
        assert srv.bodies and srv.bodies[-1].get("seed") == 7
    finally:
        srv.stop()


def test_the_run_pages_announcing_backend_survives_the_agents_own_view():
    """The agent calls the model through its own view (`for_agent`: its own prompt cache). In the app that view
    must still be the page's AnnouncingLLM, or Pause would no longer stop a call in flight and a slow call would
    not say what it is (the page sets `on_call` and `cancel` on `agent.llm`)."""
    from agent_core.config import preset
    from agent_core.controller import Agent, ScriptedSwift
    from agent_core.llm import ScriptedBackend
    from session.agent_factory import AnnouncingLLM

    inner = ScriptedBackend(lambda prompt: "Q1: a pot.")
    agent = Agent(preset("baseline"), ScriptedSwift(lambda state, valid: "look around"), AnnouncingLLM(inner),
                  env=object())
    assert isinstance(agent.llm, AnnouncingLLM) and agent.sage.llm is agent.llm
    heard = []
    agent.llm.on_call = heard.append
    assert agent.sage.llm.chat("Which room?").text == "Q1: a pot." and heard == ["Which room?"]


@pytest.mark.model
def test_a_kept_cache_file_names_its_step_and_goes_on_through_steps_without_a_call(tmp_path):
    """The cache kept beside a trace (Agent._keep_llm_cache): given back only for the step it is of; a resumed agent
    whose next step makes no call keeps naming the same file, so a second resume still finds it."""
    shared = make_backend(LLMConfig(backend="embedded", embedded_model="smollm2-135m", n_ctx=2048, timeout_s=600))
    trace = tmp_path / "run.jsonl"
    first = shared.for_agent()
    first.new_episode()
    first.chat(PLAN_PROMPT, max_tokens=4)
    first.save_cache_file(trace, 1)
    second = shared.for_agent()
    assert second.load_cache_file(trace, 2) == "the kept cache is of step 1, not 2"
    assert second.load_cache_file(trace, 1) == ""
    second.save_cache_file(trace, 2)  # its step 2 made no call
    third = shared.for_agent()
    assert third.load_cache_file(trace, 2) == ""
    r = third.chat(PLAN_PROMPT + " Be brief.", max_tokens=4)
    assert r.extra["cache_state"] == "restored" and int(r.extra["cached_tokens"]) > 30
    (tmp_path / "run.jsonl.llmcache").write_bytes(b"something else")
    assert "not one this program wrote" in shared.for_agent().load_cache_file(trace, 2)
    good = (tmp_path / "run.jsonl.llmcache.json").read_text()
    (tmp_path / "run.jsonl.llmcache.json").write_text("[2]")  # a damaged stamp: a reason, never a crashed resume
    assert shared.for_agent().load_cache_file(trace, 2) == "the cache's stamp file is damaged"
    (tmp_path / "run.jsonl.llmcache.json").write_text(good)
    head = b'["not", "a", "head"]'
    (tmp_path / "run.jsonl.llmcache").write_bytes(CACHE_MAGIC + len(head).to_bytes(8, "little") + head)
    assert shared.for_agent().load_cache_file(trace, 2) == "the cache file is damaged"
