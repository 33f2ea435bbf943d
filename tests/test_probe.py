"""The classroom probe: every input a visitor has, tried against a shared app with what an attacker would send.

A real `streamlit run` server (share mode, and a local app behind a real nginx), light websocket browsers
(tests/st_client.py) for the links every page reads, and AppTest for the pages' text fields. A loopback listener
stands in for an attacker's server: every URL the probe hands the app points at it, and it must never be asked
for anything. A file outside the app's folders carries a marker that must never be shown. docs/CLASSROOM.md lists
what is tried.
"""
from __future__ import annotations

import asyncio
import os
import urllib.parse
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.browser_util import ROOT, nginx_proxy, served_app
from tests.llm_server import Listener
from tests.st_client import Session

EXAMPLE = ROOT / "assets" / "episodes" / "inclined-plane-friction-named-surfaces-v1038-full.jsonl"
SECRET = "OUTSIDE-SECRET-7f3a"  # in every file outside the app's folders: never on a page
PASS = "teacher-passcode-42"


@pytest.fixture
def listener():
    lst = Listener()
    yield lst
    lst.stop()


def _outside(tmp_path: Path) -> Path:
    """A folder outside the app's: a trace whose task description is the marker."""
    out = tmp_path / "outside"
    out.mkdir()
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"task_description": "', f'"task_description": "{SECRET} ', 1)
    (out / "secret.jsonl").write_text("".join(lines))
    (out / "passwd").write_text(f"root:x:0:0:{SECRET}\n")
    return out


def _runs(tmp_path: Path, outside: Path) -> Path:
    """runs/ with one real trace and links that point outside (a trace, a folder), the link the newest file."""
    runs = tmp_path / "runs"
    (runs / "memory").mkdir(parents=True)
    (runs / "20261207-090000-inclined-plane-friction-named-surfaces-v1038-full-abcdef.jsonl").write_bytes(
        EXAMPLE.read_bytes())
    (runs / "zzz-newest-link.jsonl").symlink_to(outside / "secret.jsonl")
    (runs / "memory" / "link").symlink_to(outside, target_is_directory=True)
    os.utime(runs / "zzz-newest-link.jsonl", follow_symlinks=False)
    return runs


def hostile_values(listener_url: str, outside: Path) -> list[str]:
    """What a visitor can put in a link's value: traversal (plain, encoded, doubly encoded), absolute paths outside,
    links inside runs/ that point outside, URLs to the attacker's server, other schemes, control characters,
    non-ASCII digits, volume."""
    return ["../../../../etc/passwd", "runs/../../outside/secret.jsonl", "%2e%2e/%2e%2e/etc/passwd",
            "%252e%252e%252fetc%252fpasswd", "/etc/passwd", str(outside / "secret.jsonl"), str(outside),
            "runs/zzz-newest-link.jsonl", f"{listener_url}/x.jsonl", "file:///etc/passwd", "\\\\127.0.0.1\\c$",
            "x\x00.jsonl", "a\nb", "²", "-1", "99999999999999999999", "A" * 5000, "<script>alert(1)</script>",
            "![p](" + listener_url + "/img.png)"]


PROBED = {  # page URL path -> the link parameters it reads
    "": ("trace", "step", "follow"),
    "compare": ("a", "b"),
    "evaluate": ("eval",),
    "ask": ("trace",),
}


async def _visit(url: str, sessions: list[Session], timeout: float = 90.0, at_once: int = 4) -> None:
    """Each session opens its page, draws it once, and leaves."""
    sem = asyncio.Semaphore(at_once)

    async def one(s: Session) -> None:
        async with sem:
            stop = asyncio.Event()
            task = asyncio.create_task(s.run(stop))
            deadline = asyncio.get_running_loop().time() + timeout
            while s.runs_finished < 1 and not task.done() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.1)
            stop.set()
            await task
            if s.runs_finished < 1 and not s.errors:
                s.errors.append(f"{s.name}: no script run finished within {timeout:g} s")

    await asyncio.gather(*(one(s) for s in sessions))


def _leaks(s: Session) -> list[str]:
    text = "\n".join(s.texts)
    out = []
    if SECRET in text:
        out.append("the marker of a file outside the app's folders")
    if "Traceback" in text or '.py", line' in text:
        out.append("a traceback")
    if "Something went wrong while drawing this page" in text:  # the shell caught what the page did not refuse
        out.append("a page error: " + next(t for t in s.texts if "Something went wrong" in t))
    return out


@pytest.mark.server
@pytest.mark.slow
def test_probe_every_link_a_visitor_can_send(tmp_path, listener):
    outside = _outside(tmp_path)
    runs = _runs(tmp_path, outside)
    before = sorted(p.name for p in outside.rglob("*"))
    env = {"SWIFTSAGE_SHARE": "1", "SWIFTSAGE_PASSCODE": PASS, "SWIFTSAGE_FOLLOW_POLL_S": "60"}
    sessions = []
    for page, params in PROBED.items():
        for param in params:
            for i, v in enumerate(hostile_values(listener.url, outside)):
                q = urllib.parse.urlencode({param: v, **({"trace": str(next(runs.glob("2026*")))}
                                                         if param == "step" else {})})
                sessions.append(Session("", q, name=f"/{page}?{param}=<value {i}>", page=page))
    sessions.append(Session("", "follow=live", name="/?follow=live (the newest file is a link outside)"))
    with served_app(runs, ROOT / "tests" / "artifacts" / "probe_server.log", env=env) as url:
        for s in sessions:
            s.url = url
        asyncio.run(_visit(url, sessions))
    problems = [f"{s.name}: {e}" for s in sessions for e in s.errors]
    problems += [f"{s.name}: {leak}" for s in sessions for leak in _leaks(s)]
    assert not problems, "\n".join(problems[:20])
    assert all(s.texts for s in sessions)  # every page drew something (a refusal is a line, not a blank page)
    assert listener.requests == []
    assert sorted(p.name for p in outside.rglob("*")) == before  # nothing created or changed outside
    drew = {page: {t for s in sessions if s.page == page for t in s.texts} for page in PROBED}
    assert any(t.startswith("Episode A") for t in drew["compare"]) and any("Evaluation" in t for t in drew["evaluate"])
    assert any(t.startswith("Ask about") for t in drew["ask"]) and any("Step" in t for t in drew[""])
    refused = [s for s in sessions if any("ignored" in t or "not a" in t or "not an" in t for t in s.texts)]
    assert len(refused) >= len(sessions) // 2  # most values are refused with a line that says so
    follow = sessions[-1]
    assert not any("Live run" in t for t in follow.texts)  # a visitor: no run controls


@pytest.mark.server
@pytest.mark.slow
def test_behind_a_loopback_proxy_a_local_app_is_locked_and_a_wrong_host_is_refused(tmp_path):
    """A local app (bound to 127.0.0.1, no --share) is the operator's only for a request that is provably local.
    Behind nginx on the same machine every visitor arrives from 127.0.0.1, and is still a visitor."""
    runs = tmp_path / "runs"
    runs.mkdir()
    env = {"SWIFTSAGE_SHARE": "0", "SWIFTSAGE_FOLLOW_POLL_S": "60"}

    def unlocked(s: Session) -> bool:
        return any(t.endswith("Live run | Recorded episode | Follow live") for t in s.texts)

    def locked(s: Session) -> bool:
        return not unlocked(s) and (any("Classroom" in t for t in s.texts) or any("403" in e for e in s.errors))

    with served_app(runs, ROOT / "tests" / "artifacts" / "probe_proxy_server.log", env=env) as url, \
            nginx_proxy(url, tmp_path / "nginx") as proxied:
        port = {m: u.rsplit(":", 1)[1] for m, u in proxied.items()}
        sessions = {
            "direct": Session(url, name="direct"),
            "forwarding": Session(proxied["forwarding"], name="nginx, X-Forwarded-For"),
            "forwarding, a public name": Session(proxied["forwarding"], name="nginx, Host classroom.example",
                                                 host="classroom.example"),
            "plain": Session(proxied["plain"], name="nginx defaults, the browser's Origin",
                             headers={"Origin": f"http://classroom.example:{port['plain']}"}),
            "plain, no Origin": Session(proxied["plain"], name="nginx defaults, no Origin"),
            "rebinding": Session(url, name="DNS rebinding", host="attacker.example"),
        }
        asyncio.run(_visit(url, list(sessions.values()), at_once=2))
    s = sessions
    assert unlocked(s["direct"]) and not any("Classroom" in t for t in s["direct"].texts), s["direct"].texts[:20]
    assert locked(s["forwarding"]) and any("Classroom" in t for t in s["forwarding"].texts)
    for name in ("forwarding, a public name", "plain", "rebinding"):
        assert locked(s[name]), (name, s[name].errors, s[name].texts[:10])
        assert any("403" in e for e in s[name].errors), (name, s[name].errors)  # refused before any page runs
    # nginx's defaults without an Origin (not a browser: a script on this machine) look exactly like a local
    # browser: that is the machine's own user, whom nothing can tell apart
    assert unlocked(s["plain, no Origin"])


def _memory_page(tmp_path: Path, runs: Path, monkeypatch) -> AppTest:
    for k, v in {"SWIFTSAGE_SHARE": "1", "SWIFTSAGE_PASSCODE": PASS, "SWIFTSAGE_RUNS_DIR": str(runs)}.items():
        monkeypatch.setenv(k, v)
    at = AppTest.from_file(str(ROOT / "pages" / "2_Memory.py"), default_timeout=120)
    at.session_state["mem_dir"] = str(runs / "memory" / "none-yet")
    at.run()
    return at


@pytest.mark.page
@pytest.mark.model
def test_probe_every_text_field_a_visitor_can_type(tmp_path, listener, monkeypatch):
    """The Memory explorer's and the Ask page's path fields, and the paste box, with the same hostile values: each is
    refused with a message or finds nothing; nothing outside is read or created; no page raises."""
    from memory_store import MemoryConfig, open_stream, seed_demo

    outside = _outside(tmp_path)
    store = outside / "store"
    seed_demo(open_stream(MemoryConfig(persist_dir=str(store))))
    runs = _runs(tmp_path, outside)
    before = {p: p.stat().st_mtime_ns for p in outside.rglob("*")}
    values = [v for v in hostile_values(listener.url, outside) if "\x00" not in v]  # a text field cannot send NUL
    values += [str(store), "runs/memory/link/store", f"{runs}/memory/link/store", listener.url, "~/", "~root"]
    at = _memory_page(tmp_path, runs, monkeypatch)
    for v in values:
        at.session_state["mem_dir"] = v
        at.run()
        assert not at.exception, (v, at.exception)
        assert not at.metric, v  # no store was opened
        at.text_input(key="mem_trace_path").input(v).run()
        assert not at.exception and not any(SECRET in m.value for m in at.markdown), v
        assert "mem_trace_pick" not in {w.key for w in at.selectbox}, v
        at.text_input(key="mem_trace_path").input("")
    for pasted in ("{" * 10000, '{"retrievals": [{"query": "' + "x" * 100000 + '"}]}', "<script>alert(1)</script>",
                   '{"top": "not a list", "weights": null}'):
        at.text_area(key="mem_paste").input(pasted).run()
        assert not at.exception, pasted[:40]
    ask = AppTest.from_file(str(ROOT / "pages" / "6_Ask.py"), default_timeout=120)
    ask.run()
    ask.radio(key="ask_mode").set_value("store").run()
    for v in values:
        ask.text_input(key="ask_store").input(v).run()
        assert not ask.exception, v
        assert any("outside the app's folders" in e.value for e in ask.error) or \
            any("no memory store" in w.value.lower() for w in ask.warning), v
    assert {p: p.stat().st_mtime_ns for p in outside.rglob("*")} == before
    assert listener.requests == []


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.model
def test_a_disabled_button_pressed_by_a_crafted_message_does_nothing(tmp_path):
    """A browser cannot press a disabled button, but a script speaking the websocket protocol can send the press:
    nothing is created (Streamlit 1.67 drops a disabled widget's press, and the Memory explorer's store buttons
    check the visitor again themselves). The same message in a local app does create the store."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    runs = tmp_path / "runs"
    runs.mkdir()
    new = runs / "memory" / "made-by-a-visitor"

    async def scenario(url: str) -> Session:
        s = Session(url, page="Memory", name="crafted")
        stop = asyncio.Event()
        task = asyncio.create_task(s.run(stop))

        async def drawn(n: int) -> None:
            for _ in range(900):
                if s.runs_finished >= n or task.done():
                    return
                await asyncio.sleep(0.1)

        await drawn(1)
        box = WidgetState(id=s.widgets["Memory store directory"], string_value=str(new))
        await s.send_rerun(widget_states=[box])
        await drawn(2)
        press = WidgetState(id=s.widgets["Create a small demo store there"], trigger_value=True)
        await s.send_rerun(widget_states=[box, press])
        await drawn(3)
        stop.set()
        await task
        return s

    env = {"SWIFTSAGE_SHARE": "1", "SWIFTSAGE_PASSCODE": PASS}
    with served_app(runs, ROOT / "tests" / "artifacts" / "probe_crafted_server.log", env=env) as url:
        s = asyncio.run(scenario(url))
    assert s.runs_finished >= 3 and not s.errors, s.errors
    assert not new.exists()
    assert any("only the teacher" in t for t in s.texts)  # the page said who may create a store
