"""Five browser sessions with live runs at once (five AppTests in one process, as five tabs share one
Streamlit server): each has its own agent, JVM and trace; interleaved steps never cross; memory per session is
measured (the process and its JVMs, from /proc)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from agent_core.trace import read_episode

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.page, pytest.mark.jvm, pytest.mark.model]
TASKS = [("boil", 21), ("find-living-thing", 225), ("melt", 22), ("lifespan-longest-lived", 94), ("freeze", 21)]


def rss_mb(pid: int) -> float:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree_rss_mb(pid: int) -> float:
    """RSS of a process and all its descendants (the app and its ScienceWorld JVMs)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += rss_mb(p)
        todo += children.get(p, [])
    return total


def test_five_sessions_at_once_do_not_cross(monkeypatch, tmp_path):
    runs = tmp_path / "runs"
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    base = tree_rss_mb(os.getpid())
    sessions, after = [], []
    for task, var in TASKS:
        at = AppTest.from_file(str(ROOT / "pages" / "0_Run.py"), default_timeout=300)
        at.session_state["run_source"] = "Live run"  # not the first-visit example
        at.run()
        at.toggle(key="run_quick").set_value(True)  # Swift alone: no model calls, the sessions' own state is tested
        at.selectbox(key="run_task").set_value(task)
        at.run()
        at.selectbox(key="run_variation").set_value(var).run()
        at.button(key="run_reset").click().run()
        assert not at.exception, at.exception
        sessions.append(at)
        after.append(tree_rss_mb(os.getpid()))
    for _round in range(3):  # interleaved: one step in each session, in turn
        for at in sessions:
            if not at.session_state["run_agent"].done:
                at.button(key="run_step").click().run()
                assert not at.exception, at.exception
    agents = [at.session_state["run_agent"] for at in sessions]
    try:
        assert len({id(a) for a in agents}) == 5 and len({id(a.env) for a in agents}) == 5
        assert len({a.env.jvm_pid for a in agents}) == 5  # one JVM each
        paths = [a.trace_path for a in agents]
        assert len(set(paths)) == 5
        for (task, var), a, p in zip(TASKS, agents, paths):
            ep = read_episode(p)
            assert (ep.header.task, ep.header.variation) == (task, var)
            assert len(ep.steps) == len(a.records) >= 1
            assert all(s.step == i + 1 for i, s in enumerate(ep.steps))  # each session's own numbering
            assert [s.action for s in ep.steps] == [r.action for r in a.records]
        shared = after[0] - base  # the first session also loads what all share (Swift, the page's modules)
        per_session = (after[-1] - after[0]) / 4
        print(f"memory: {base:.0f} MB before, {after[0]:.0f} MB with 1 session, {after[-1]:.0f} MB with 5: "
              f"~{per_session:.0f} MB per further session (its JVM and agent), {shared:.0f} MB for the first")
        assert per_session < 1000
    finally:
        for a in agents:
            a.close()
