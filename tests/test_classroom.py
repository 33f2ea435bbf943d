"""A shared classroom: share mode locks the LLM, the key and the folders to the operator's choice, a teacher
passcode unlocks runs in one browser, and any number of browsers follow the teacher's run live.

Real Streamlit pages (AppTest), a real server with real Chromium, and light websocket clients; loopback only.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from agent_core.config import LLMConfig
from tests.browser_util import (ROOT, chromium_page, click_button, group_nices, served_app, unlock_live_run,
                                wait_for_step, wait_idle)
from tests.llm_server import BadServer

EXAMPLE = ROOT / "assets" / "episodes" / "inclined-plane-friction-named-surfaces-v1038-full.jsonl"
PASS = "owl-42-teal"
KEY = "sk-operator-secret-123"


@pytest.fixture
def listeners():
    """Two OpenAI-compatible listeners on 127.0.0.1: the operator's server and one a visitor might name."""
    operator, stranger = BadServer(), BadServer()
    operator.mode, operator.delay, stranger.mode = "slow", 0.0, "empty"  # the operator's answers at once
    yield operator, stranger
    operator.stop()
    stranger.stop()


def _share_env(monkeypatch, tmp_path: Path, operator_url: str) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir()
    for k, v in {"SWIFTSAGE_SHARE": "1", "SWIFTSAGE_PASSCODE": PASS, "SWIFTSAGE_LLM_API_KEY": KEY,
                 "SWIFTSAGE_LLM_BACKEND": "openai", "SWIFTSAGE_LLM_BASE_URL": operator_url,
                 "SWIFTSAGE_LLM_MODEL": "class-model", "SWIFTSAGE_RUNS_DIR": str(runs)}.items():
        monkeypatch.setenv(k, v)
    return runs


def _run_page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / "0_Run.py"), default_timeout=120)
    at.run()
    return at


def _keys(at: AppTest, kind: str) -> set[str]:
    return {w.key for w in getattr(at, kind)}


@pytest.mark.page
def test_share_mode_locks_the_run_page_until_the_teacher_passcode(monkeypatch, tmp_path, listeners):
    operator, stranger = listeners
    _share_env(monkeypatch, tmp_path, operator.base_url)
    at = _run_page()
    assert not at.exception
    assert at.radio(key="run_source").options == ["Recorded episode", "Follow live"]  # no live run for a visitor
    assert "run_reset" not in _keys(at, "button") and "run_fork" not in _keys(at, "button")
    # a wrong passcode is refused and says so
    at.text_input(key="share_passcode_typed").input("guess")
    at.button(key="share_unlock").click().run()
    assert any("not the teacher passcode" in e.value for e in at.error)
    assert "Live run" not in at.radio(key="run_source").options
    at.text_input(key="share_passcode_typed").input(PASS)
    at.button(key="share_unlock").click().run()
    assert at.radio(key="run_source").options[0] == "Live run"
    at.radio(key="run_source").set_value("Live run").run()
    # the teacher gets the run controls, but the LLM is the operator's: shown, never a field
    assert "run_reset" in _keys(at, "button")
    assert {"run_backend", "run_emb_model"}.isdisjoint(_keys(at, "selectbox"))
    assert {"run_base_url", "run_llm_model"}.isdisjoint(_keys(at, "text_input"))
    assert "run_llm_threads" not in _keys(at, "number_input")
    assert any(operator.base_url in c.value and "fixed by whoever started" in c.value for c in at.caption)
    # whatever the session holds, the agent gets the operator's server and key
    built = []
    at.session_state["agent_factory"] = lambda cfg: built.append(cfg) or (_ for _ in ()).throw(RuntimeError("stop"))
    at.session_state["run_backend"], at.session_state["run_base_url"] = "openai", stranger.base_url
    at.button(key="run_reset").click().run()
    assert built and built[0].llm.base_url == operator.base_url and built[0].llm.model == "class-model"
    assert built[0].llm.api_key == KEY and built[0].llm.backend == "openai"
    assert stranger.auth == []
    at.button(key="share_lock").click().run()  # locked again: the live run is gone from this browser
    assert "Live run" not in at.radio(key="run_source").options and "run_reset" not in _keys(at, "button")


@pytest.mark.page
def test_locally_nothing_is_locked(monkeypatch, tmp_path):
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("SWIFTSAGE_SHARE", raising=False)
    at = _run_page()
    assert at.radio(key="run_source").options == ["Live run", "Recorded episode", "Follow live"]
    at.radio(key="run_source").set_value("Live run").run()
    assert "run_backend" in _keys(at, "selectbox") and "run_reset" in _keys(at, "button")
    assert "share_passcode_typed" not in _keys(at, "text_input")


def test_the_key_goes_only_to_the_operators_server(monkeypatch, tmp_path, listeners):
    from views import share
    from session.llm import llm_backend

    operator, stranger = listeners
    _share_env(monkeypatch, tmp_path, operator.base_url)
    with pytest.raises(PermissionError, match="only to the server its operator configured"):
        llm_backend(LLMConfig(backend="openai", base_url=stranger.base_url))
    assert share.page_llm(LLMConfig(backend="openai", base_url=stranger.base_url)).base_url == operator.base_url
    backend = llm_backend(share.operator().llm())  # the operator's own server: the key is sent there
    reply = backend.chat([{"role": "user", "content": "hi"}], max_tokens=4)
    assert reply is not None
    assert operator.auth and all(a == f"Bearer {KEY}" for a in operator.auth)
    assert stranger.auth == []
    monkeypatch.setenv("SWIFTSAGE_SHARE", "0")  # locally the visitor is the operator: any URL is theirs
    share.check_llm(LLMConfig(backend="openai", base_url=stranger.base_url))


def _store_outside(tmp_path: Path) -> Path:
    from memory_store import MemoryConfig, open_stream, seed_demo

    store = tmp_path / "elsewhere" / "store"
    seed_demo(open_stream(MemoryConfig(persist_dir=str(store))))
    return store


@pytest.mark.page
@pytest.mark.model
def test_memory_explorer_refuses_paths_outside_the_app(monkeypatch, tmp_path, listeners):
    _share_env(monkeypatch, tmp_path, listeners[0].base_url)
    outside_new = tmp_path / "outside" / "new-store"
    at = AppTest.from_file(str(ROOT / "pages" / "2_Memory.py"), default_timeout=120)
    at.session_state["mem_dir"] = str(outside_new)
    at.run()
    assert not at.exception
    assert any("outside the app's folders" in e.value and "Nothing was read" in e.value for e in at.error)
    assert "mem_seed_new" not in _keys(at, "button")
    assert not outside_new.exists() and not outside_new.parent.exists()
    # an existing store outside: refused before it is opened (no metrics, no table)
    store = _store_outside(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in store.rglob("*")}
    at.session_state["mem_dir"] = str(store)
    at.run()
    assert any("outside the app's folders" in e.value for e in at.error) and not at.metric
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*")} == before
    # a trace file outside is not read either
    secret = tmp_path / "outside-trace.jsonl"
    secret.write_text(EXAMPLE.read_text())
    at.text_input(key="mem_trace_path").input(str(secret)).run()
    assert any("outside the app's folders" in e.value and "trace files" in e.value for e in at.error)
    assert "mem_trace_pick" not in _keys(at, "selectbox")
    # inside runs/: allowed, but creating a store there is the teacher's
    inside = Path(str(tmp_path / "runs" / "memory" / "class-demo"))
    at.text_input(key="mem_trace_path").input("")
    at.session_state["mem_dir"] = str(inside)
    at.run()
    assert not any("outside the app's folders" in e.value for e in at.error)
    assert at.button(key="mem_seed_new").disabled and not inside.exists()


@pytest.mark.page
@pytest.mark.model
def test_ask_page_in_share_mode_uses_the_operators_model_and_folders(monkeypatch, tmp_path, listeners):
    operator, stranger = listeners
    _share_env(monkeypatch, tmp_path, operator.base_url)
    store = _store_outside(tmp_path)
    at = AppTest.from_file(str(ROOT / "pages" / "6_Ask.py"), default_timeout=120)
    at.run()
    assert {"ask_url", "ask_model"}.isdisjoint(_keys(at, "text_input")) and "ask_backend" not in _keys(at, "selectbox")
    at.radio(key="ask_mode").set_value("store").run()
    at.text_input(key="ask_store").input(str(store)).run()
    assert any("outside the app's folders" in e.value for e in at.error)
    # a visitor's question about an episode gets its memories, and no model call is made
    at.radio(key="ask_mode").set_value("episode").run()
    at.chat_input(key="ask_input").set_value("what do you know about the block?").run()
    (h,) = at.session_state["ask_history"]
    assert h["answer"] is None and h["retrieval"]["candidates"]
    # a question the records answer exactly is answered from them, still without the model
    at.chat_input(key="ask_input").set_value("Who acted at step 1 and why?").run()
    h = at.session_state["ask_history"][1]
    assert h["answer"]["grounding"] == "records" and h["answer"]["model"] == "" and not h["answer"]["raw"]
    assert operator.auth == [] and stranger.auth == []


@pytest.mark.page
@pytest.mark.model
def test_visitors_model_calls_stop_at_the_operators_limit(monkeypatch, tmp_path, listeners):
    """With SWIFTSAGE_VISITORS_ASK_MODEL=1 a locked browser's questions reach the operator's model, one at a time,
    and stop at the per-browser limit with a message; the memories still answer."""
    from views import share
    from views.visitor_limits import ModelQueue

    operator, stranger = listeners
    _share_env(monkeypatch, tmp_path, operator.base_url)
    monkeypatch.setenv("SWIFTSAGE_VISITORS_ASK_MODEL", "1")
    monkeypatch.setenv("SWIFTSAGE_VISITOR_CALLS_PER_BROWSER", "2")
    monkeypatch.setattr(share, "_queues", {})  # a fresh line, as on a new server
    at = AppTest.from_file(str(ROOT / "pages" / "6_Ask.py"), default_timeout=120)
    at.run()
    for q in ("what do you know about the block?", "what did you learn about friction?", "what is a plane?"):
        at.chat_input(key="ask_input").set_value(q).run()
    answers = [h["answer"] for h in at.session_state["ask_history"]]
    assert [bool(a["error"]) for a in answers[:2]] == [False, False] and len(operator.auth) == 2
    assert "2 times in this hour" in answers[2]["error"] and "memories still answer" in answers[2]["error"]
    assert at.session_state["ask_history"][2]["retrieval"]["candidates"]  # the memories were still retrieved
    assert any("2 times in this hour" in e.value for e in at.error)
    assert stranger.auth == [] and isinstance(share.visitor_queue(), ModelQueue) and share.visitor_queue().waiting() == 0


def test_operator_settings_are_checked(monkeypatch, tmp_path):
    cfg = tmp_path / "class.toml"
    cfg.write_text('[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n[class]\npasscode = "x-long-enough"\n'
                   'memory_roots = ["/srv/memory"]\nunlock_minutes = 90\n')
    env = {"SWIFTSAGE_APP_CONFIG": str(cfg), "PATH": "/usr/bin:/bin"}
    ok = subprocess.run([sys.executable, "-m", "views.share"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert ok.returncode == 0 and "127.0.0.1:9" in ok.stdout and "passcode: set" in ok.stdout
    cfg.write_text('[llm]\nbackend = "opneai"\n')
    bad = subprocess.run([sys.executable, "-m", "views.share"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "'opneai' is not one of embedded, openai" in bad.stderr
    cfg.write_text('[class]\npascode = "x"\n')
    bad = subprocess.run([sys.executable, "-m", "views.share"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown key class.pascode" in bad.stderr
    cfg.write_text('[class]\npasscode = "short"\n')  # a passcode a class could guess
    bad = subprocess.run([sys.executable, "-m", "views.share"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "has 5 characters; use at least 10" in bad.stderr and "short" not in bad.stdout


def test_trace_tail_reads_only_what_was_added(tmp_path):
    from agent_core.trace import TraceError, TraceTail, read_episode

    lines = EXAMPLE.read_bytes().split(b"\n")
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"")
    tail = TraceTail(path)
    with pytest.raises(TraceError):
        tail.poll()
    path.write_bytes(lines[0] + b"\n" + lines[1][:40])  # a header and half a step
    ep = tail.poll()
    assert ep.steps == [] and ep.truncated_tail is not None
    with open(path, "ab") as fh:
        fh.write(lines[1][40:] + b"\n" + lines[2] + b"\n")
    assert [s.step for s in tail.poll().steps] == [1, 2]
    path.write_bytes(b"\n".join(lines[:2]) + b"\n")  # rewritten shorter (a resumed run reopens its trace)
    assert [s.step for s in tail.poll().steps] == [1]
    path.write_bytes(EXAMPLE.read_bytes())
    full = read_episode(EXAMPLE)
    got = tail.poll()
    assert [s.action for s in got.steps] == [s.action for s in full.steps] and got.summary == full.summary


@pytest.mark.page
def test_follow_view_grows_with_the_trace_and_scrubs_back(monkeypatch, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    live = runs / "20261202-100000-live.jsonl"
    live.write_text("".join(lines[:4]))
    at = AppTest.from_file(str(ROOT / "pages" / "0_Run.py"), default_timeout=120)
    at.query_params["follow"] = "live"
    at.run()
    header = [m.value for m in at.markdown if m.value.startswith("### Step")]
    assert header[0].startswith("### Step 3 ·") and any("Live" in i.value for i in at.info)
    with open(live, "a") as fh:
        fh.write(lines[4])
    time.sleep(0.6)  # the newest-run lookup is shared for half a second
    at.run()
    assert [m.value for m in at.markdown if m.value.startswith("### Step")][0].startswith("### Step 4 ·")
    at.button(key="follow_prev").click().run()  # scrub back: stays there while steps are added
    with open(live, "a") as fh:
        fh.write(lines[5])
    at.run()
    assert [m.value for m in at.markdown if m.value.startswith("### Step")][0].startswith("### Step 3 ·")
    assert not at.button(key="follow_live").disabled
    at.button(key="follow_live").click().run()
    assert [m.value for m in at.markdown if m.value.startswith("### Step")][0].startswith("### Step 5 ·")


@pytest.mark.browser
@pytest.mark.server
@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.slow
def test_locked_class_in_chromium_teacher_unlocks_and_a_follower_sees_each_step(tmp_path, listeners):
    operator, stranger = listeners
    runs = tmp_path / "runs"
    env = {"SWIFTSAGE_SHARE": "1", "SWIFTSAGE_PASSCODE": PASS, "SWIFTSAGE_LLM_API_KEY": KEY,
           "SWIFTSAGE_LLM_BACKEND": "openai", "SWIFTSAGE_LLM_BASE_URL": operator.base_url}
    outside = tmp_path / "not-the-apps" / "store"
    log = ROOT / "tests" / "artifacts" / "classroom_server.log"
    with served_app(runs, log, env=env) as url, chromium_page() as page:
        page.goto(url)
        side = page.get_by_test_id("stSidebar")
        side.get_by_text("Follow live", exact=True).wait_for(timeout=60_000)
        wait_idle(page)
        assert side.get_by_text("Live run", exact=True).count() == 0
        assert page.get_by_role("button", name="Reset", exact=True).count() == 0
        assert page.get_by_role("textbox", name="Server URL").count() == 0
        # the Memory explorer refuses a path outside the app's folders, and creates nothing
        page.goto(f"{url}/Memory")
        box = page.get_by_role("textbox", name="Memory store directory")
        box.wait_for(timeout=60_000)
        box.fill(str(outside))
        box.press("Enter")
        page.get_by_text("outside the app's folders").first.wait_for(timeout=30_000)
        assert not outside.parent.exists()
        # a follower opens the class link before the teacher starts
        follower = page.context.new_page()
        follower.goto(f"{url}/?follow=live")
        follower.get_by_text("Nothing to follow yet").first.wait_for(timeout=60_000)
        # the teacher unlocks this browser, starts a quick (Swift-only) episode and steps it
        unlock_live_run(page, url, PASS)
        assert page.get_by_role("textbox", name="Server URL").count() == 0
        side.get_by_text("Quick demo: Swift alone").click()
        wait_idle(page)
        click_button(page, "Reset")
        wait_for_step(page, 0, 180)
        wait_idle(page)
        assert "?follow=live" in page.get_by_test_id("stMain").inner_text()
        # the teacher's JVM runs at the server's priority, not at a visitor's (the browser was one before Unlock;
        # a smoke check: the unlock above waits for the page's draw, so its rerun starts a fresh thread)
        assert group_nices(url, "java") and set(group_nices(url, "java")) == {os.getpriority(os.PRIO_PROCESS, 0)}
        for k in range(1, 4):
            click_button(page, "Step")
            wait_for_step(page, k, 120)
            wait_idle(page)
            wait_for_step(follower, k, 30)  # the follower shows each new step by itself
        assert "Live" in follower.get_by_test_id("stMain").inner_text()
        follower.get_by_role("button", name="◀ Previous").click()
        wait_for_step(follower, 2, 30)
        follower.get_by_role("button", name="⏭ Jump to live").click()
        wait_for_step(follower, 3, 30)
    assert stranger.auth == [] and operator.auth == []  # quick demo: no model call at all, and nothing elsewhere
    (trace,) = runs.glob("*.jsonl")
    assert trace.read_text().count('"kind": "step"') == 3


@pytest.mark.server
@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.slow
def test_five_followers_watch_a_live_run(tmp_path):
    """The classroom load benchmark in small: a run written by the agent's CLI, five websocket followers. Their
    browsers' own polling is set to once a minute, so each step they see was pushed by the server's watcher."""
    from tests.st_client import Session, run_sessions

    runs = tmp_path / "runs"
    runs.mkdir()
    log = ROOT / "tests" / "artifacts" / "classroom_load_server.log"

    async def scenario(url: str) -> tuple[list[Session], Path]:
        stop = asyncio.Event()
        followers = [Session(url, "follow=live", name=f"follower{i}") for i in range(5)]
        task = asyncio.create_task(run_sessions(followers, stop))
        for f in followers:
            await asyncio.wait_for(f.connected.wait(), 60)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agent_core.run", "--task", "boil", "--variation", "21", "--preset", "srm",
            "--max-steps", "12", "--runs-dir", str(runs), "--quiet", "--set", "controller.sage_enabled=false",
            "--set", "srm.critic_enabled=false", cwd=str(ROOT))
        assert await asyncio.wait_for(proc.wait(), 300) == 0
        await asyncio.sleep(4)  # a poll and a redraw
        stop.set()
        await task
        (trace,) = runs.glob("*.jsonl")
        return followers, trace

    with served_app(runs, log, env={"SWIFTSAGE_SHARE": "1", "SWIFTSAGE_FOLLOW_POLL_S": "60"}) as url:
        followers, trace = asyncio.run(scenario(url))
    steps = sum(1 for line in trace.read_text().splitlines() if json.loads(line)["kind"] == "step")
    assert steps >= 5
    for f in followers:
        assert f.errors == []
        assert max(f.steps_seen) == steps  # each follower ends on the last step
        assert len(f.steps_seen) >= 2  # and saw the run move, not just its end


def test_visitors_pages_are_drawn_below_the_teachers_run(monkeypatch):
    """A shared app's visitor draws at a lower CPU priority (the thread of that run only); locally nothing changes."""
    import os
    import threading

    from views import share

    def nice_after_call() -> int:
        out = {}

        def run() -> None:
            share.lower_priority_for_visitors()
            out["nice"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

        th = threading.Thread(target=run)
        th.start()
        th.join()
        return out["nice"]

    base = os.getpriority(os.PRIO_PROCESS, 0)
    if base >= 19:
        pytest.skip("the tests run at the lowest priority already: nothing lower to see")
    monkeypatch.setenv("SWIFTSAGE_SHARE", "0")
    assert nice_after_call() == base
    monkeypatch.setenv("SWIFTSAGE_SHARE", "1")
    monkeypatch.setattr(share, "unlocked", lambda: False)
    # lowered only where a thread that becomes the teacher's can get its priority back (root, CAP_SYS_NICE)
    assert nice_after_call() == (min(19, base + share.VISITOR_NICE) if share._reversible() else base)
    monkeypatch.setattr(share, "unlocked", lambda: True)  # the teacher's browser: normal priority
    assert nice_after_call() == base


def test_a_thread_that_becomes_the_teachers_gets_its_priority_back(monkeypatch):
    """Streamlit runs the rerun of a click made while the page still draws (the teacher's Unlock) in the thread of
    the interrupted run. That visitor's thread was lowered; the teacher's run must not keep the lower priority,
    nor hand it to what it starts (the agent's step thread, a ScienceWorld JVM)."""
    import os
    import subprocess
    import threading

    from views import share

    if not share._reversible():
        pytest.skip("this machine cannot give a thread its priority back (no CAP_SYS_NICE)")
    if os.getpriority(os.PRIO_PROCESS, os.getpid()) >= 19:
        pytest.skip("the tests run at the lowest priority already: nothing lower to see")
    monkeypatch.setenv("SWIFTSAGE_SHARE", "1")
    state = {"unlocked": False}
    monkeypatch.setattr(share, "unlocked", lambda: state["unlocked"])
    seen: dict[str, int] = {}

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def one_session_thread() -> None:
        share.lower_priority_for_visitors()  # a visitor's run
        seen["visitor"] = nice()
        share.lower_priority_for_visitors()  # a second visitor's run in the same thread: lowered once, not twice
        seen["visitor again"] = nice()
        state["unlocked"] = True  # the Unlock callback ran; the rerun starts in this thread
        share.lower_priority_for_visitors()
        seen["teacher"] = nice()
        child: dict[str, int] = {}
        th = threading.Thread(target=lambda: child.update(nice=nice()))  # the agent's step thread
        th.start()
        th.join()
        seen["step thread"] = child["nice"]
        out = subprocess.run(["sh", "-c", "cut -d' ' -f19 /proc/self/stat"], capture_output=True, text=True)
        seen["process"] = int(out.stdout)  # a process started here (as the JVM is)
        state["unlocked"] = False  # locked again ("Lock this browser again"): lowered again
        share.lower_priority_for_visitors()
        seen["locked again"] = nice()

    base = os.getpriority(os.PRIO_PROCESS, os.getpid())
    th = threading.Thread(target=one_session_thread)
    th.start()
    th.join()
    low = min(19, base + share.VISITOR_NICE)
    assert seen == {"visitor": low, "visitor again": low, "teacher": base, "step thread": base, "process": base,
                    "locked again": low}
