"""Shared fixtures: one real ScienceWorld JVM per test session (starting one costs seconds)."""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# a live step whose record does not rebuild the state it decided on fails the test (agent_core.controller)
os.environ.setdefault("SWIFTSAGE_STRICT_STATE", "1")


def pytest_configure(config):
    from tests import marks

    marks.register(config)  # a test that starts a JVM, a model, a page, a browser or a server must say so


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """`pytest -n 2 --dist loadgroup` (docs/TESTING.md) sends the tests of one `xdist_group` to one worker by
    reading a "@group" suffix of their node ids. pytest-xdist 3.8.0 adds it by setting `item._nodeid`, which
    pytest 9.2 no longer reads (the id lives in `item._id`), so the groups were silently split; add it here."""
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
        return
    import dataclasses

    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid.rpartition("]")[2]:
            grouped = dataclasses.replace(item._id)
            object.__setattr__(grouped, "_str_cache", f"{item._id}@{'_'.join(names)}")
            item._id = grouped


@pytest.fixture(scope="session")
def sw_env():
    from agent_core.env import ScienceWorld

    env = ScienceWorld()
    yield env
    env.close()


@pytest.fixture
def reorder_cups(monkeypatch):
    """ScienceWorld's rare reset of chemistry-mix-paint that lists its wood cups in another order (about 1 load in
    50), made to happen on an env's next n loads: reorder_cups(env, n)."""
    def arm(env, n: int) -> None:
        real, loads = env._load, []

        def load():
            real()
            loads.append(1)
            if len(loads) <= n:
                lines = env.last.look.splitlines()
                cups = [i for i, line in enumerate(lines) if "wood cup" in line]
                lines[cups[0]], lines[cups[-1]] = lines[cups[-1]], lines[cups[0]]
                env.last = dataclasses.replace(env.last, look="\n".join(lines))
        monkeypatch.setattr(env, "_load", load)
    return arm


def usual_look(env, task: str, variation: int) -> str:
    """The order in which a task's start is usually listed (the look of two loads in three; see reorder_cups)."""
    from collections import Counter

    return Counter(env.reset(task, variation).look for _ in range(3)).most_common(1)[0][0]


@pytest.fixture(autouse=True)
def _shared_env_defaults(request):
    """An agent started on the shared env gives it its own step limit (Agent.start): put the defaults back after
    every test that used it, so no later test plays under another test's limit (a gold replay ended at step 4)."""
    yield
    if "sw_env" in request.fixturenames:
        from agent_core.config_sections import EnvConfig

        request.getfixturevalue("sw_env").cfg = EnvConfig()


# A small real evaluation (agent_core.evaluate), shared by the evaluation tests and the Evaluate / Compare page
# tests: the real Swift, fresh ScienceWorld JVMs, the real embedded SmolLM2-135M as Sage and Critic.
EVAL_ARGS = ["--tasks", "17", "0", "--variations", "2", "--presets", "baseline", "srm", "--max-steps", "10",
             "--llm", "embedded", "--embedded-model", "smollm2-135m", "--set", "llm.n_threads=1", "--quiet"]
EVAL_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
            "PYTHONPATH": str(ROOT)}


def run_evaluation(out: Path, *extra: str, timeout: float = 900):
    import subprocess

    return subprocess.run([sys.executable, "-m", "agent_core.evaluate", "--out", str(out), *EVAL_ARGS, *extra],
                          cwd=ROOT, env=EVAL_ENV, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def small_evaluation(tmp_path_factory) -> Path:
    """evals/small: 2 tasks x 2 test variations x 2 presets (baseline, srm), 10 steps."""
    out = tmp_path_factory.mktemp("evals") / "small"
    r = run_evaluation(out)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _retry_on_interpreter_compile_bug() -> None:
    """CPython 3.11.7 (this machine's Python) sometimes fails `ast.parse` with "SystemError: AST constructor
    recursion depth mismatch" (python/cpython#106905, fixed in 3.11.8) when Streamlit compiles a page: AppTest then
    returns an empty page and no exception. Every page of this app draws at least its title, so an empty result
    is that bug: run the script again (at most twice) instead of failing a test on the interpreter's account."""
    import logging

    from streamlit.testing.v1 import AppTest

    original = AppTest.run

    def run(self, *, timeout=None):
        out = original(self, timeout=timeout)
        for _ in range(2):
            if self.exception or len(self.main.children) or len(self.sidebar.children):
                break
            logging.getLogger("tests").warning("empty page (CPython ast.parse bug): running the script again")
            out = original(self, timeout=timeout)
        return out

    AppTest.run = run


def _retry_ast_parse_on_interpreter_bug() -> None:
    """The same CPython bug hits pytest itself: its assertion rewriting and its failure reports call `ast.parse`
    while another thread (a page's script thread, a worker's) parses too, and a SystemError there is an
    INTERNALERROR that ends the whole run (seen with pytest-xdist). The state is reset at the next call, so parse
    again (at most 3 times)."""
    import ast

    original = ast.parse

    def parse(*a, **k):
        for attempt in range(4):
            try:
                return original(*a, **k)
            except SystemError as e:
                if "recursion depth mismatch" not in str(e) or attempt == 3:
                    raise

    ast.parse = parse


_retry_ast_parse_on_interpreter_bug()
_retry_on_interpreter_compile_bug()
