"""Keeps the test tiers honest (docs/TESTING.md): a test that starts a JVM, loads a neural model, runs a page,
drives a browser or starts a server must carry the matching mark (`jvm`, `model`, `page`, `browser`, `server`),
or it fails at teardown with a message naming the missing mark.

What is seen, in this process (tests/conftest.py registers the plugin):
  - every subprocess started (a CPython audit hook on `subprocess.Popen`): `java` (the ScienceWorld JVM, via py4j),
    `streamlit run`, scripts/app.sh, `llama_cpp.server`, `chroma run`, vLLM, Ray's daemons, Playwright's driver
    (the browser);
  - the real models: the Swift checkpoint (SwiftModel, load_seq2seq, the T5 / MiniLM builders), the MiniLM
    sentence embedder (Embedder.encode) and llama.cpp (EmbeddedBackend._load returning a llama_cpp model);
  - Streamlit's AppTest.run (a page).
Heavy things a session- or module-scoped fixture starts once are charged to the fixture, so every later test that
uses the fixture needs the mark too; FIXTURE_USES names fixtures whose work is done in a subprocess.
Not seen: what a Python subprocess does inside itself (the JVM and the models that `python -m agent_core.run`
loads, what a Streamlit server runs): mark those tests by reading them.

SWIFTSAGE_MARK_AUDIT=off disables the check; SWIFTSAGE_MARK_AUDIT=report:PATH only writes one JSON line per test
(node id, what it used, its marks) to PATH, without failing anything.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import threading
from pathlib import Path

import pytest

HEAVY = ("jvm", "model", "page", "browser", "server")
# fixtures whose heavy work happens in a subprocess this process cannot see into
FIXTURE_USES = {"small_evaluation": {"jvm", "model"}}  # python -m agent_core.evaluate: real Swift, JVMs, SmolLM2
_ATTR = "_swiftsage_uses"
WATCH_MISSING: list[str] = []  # watched functions that could not be found (moved or renamed)

_lock = threading.Lock()
_sinks: list[set[str]] = []  # the running test's set, then the sets of the fixtures being set up


def _note(kind: str) -> None:
    with _lock:
        for s in _sinks:
            s.add(kind)


def _classify(argv) -> set[str]:
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    args = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in (argv or [])]
    if not args:
        return set()
    line = " ".join(args)
    exe = os.path.basename(args[0])
    kinds = set()
    if exe == "java" or exe.startswith("java"):
        kinds.add("jvm")
    if "run-driver" in args or ("playwright" in line and "driver" in line):
        kinds.add("browser")
    if (("streamlit" in line and "run" in args) or "scripts/app.sh" in args or "llama_cpp.server" in line
            or "vllm" in line or (exe == "chroma" and "run" in args) or "/site-packages/ray/" in line
            or exe in ("raylet", "gcs_server")):
        kinds.add("server")
    return kinds


def _audit(event: str, args) -> None:
    if event == "subprocess.Popen" and _sinks:
        for kind in _classify(args[1] if len(args) > 1 and args[1] else args[0]):
            _note(kind)


def _wrap(owner, name: str, kind: str, when=None) -> None:
    original = getattr(owner, name)
    if getattr(original, "_swiftsage_audited", False):
        return

    @functools.wraps(original)
    def wrapper(*a, **k):
        out = original(*a, **k)
        if when is None or when(out):
            _note(kind)
        return out

    wrapper._swiftsage_audited = True
    setattr(owner, name, wrapper)


def _install() -> None:
    import importlib

    sys.addaudithook(_audit)
    # (module, attribute path, what it means, a condition on the result); a module that moved is left unwatched
    # rather than breaking the run: the test that checks this plugin (tests/test_marks.py) then fails instead
    for module, path, kind, when in [
        ("streamlit.testing.v1", "AppTest.run", "page", None),
        ("memory_store.embeddings", "Embedder.encode", "model", None),
        ("agent_core.llm.embedded", "EmbeddedBackend._load", "model",
         lambda llm: type(llm).__module__.startswith("llama_cpp")),
        ("agent_core.swift.model", "SwiftModel.__init__", "model", None),
        ("agent_core.swift.model", "SwiftModel._encode", "model", None),
        ("agent_core.swift.model", "load_seq2seq", "model", None),
        ("agent_core.swift.model", "build_t5", "model", None),
        ("agent_core.swift.model", "build_minilm_seq2seq", "model", None),
    ]:
        try:
            owner = importlib.import_module(module)
            *parents, name = path.split(".")
            for p in parents:
                owner = getattr(owner, p)
            getattr(owner, name)
        except (ImportError, AttributeError):
            WATCH_MISSING.append(f"{module}.{path}")
            continue
        _wrap(owner, name, kind, when)


class MarkAudit:
    def __init__(self, mode: str):
        self.report = Path(mode.split(":", 1)[1]) if mode.startswith("report:") else None
        self.item_uses: set[str] = set()
        _install()

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        uses: set[str] = set()
        with _lock:
            _sinks.append(uses)
        try:
            return (yield)
        finally:
            with _lock:  # by identity: sets that are equal are not the same sink
                _sinks[:] = [x for x in _sinks if x is not uses]
            setattr(fixturedef, _ATTR, getattr(fixturedef, _ATTR, set()) | uses)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item):
        self.item_uses = set()
        with _lock:
            _sinks[:] = [self.item_uses]
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        try:
            res = yield
        finally:
            with _lock:
                _sinks.clear()
        self._check(item)
        return res

    def _check(self, item) -> None:
        uses = set(self.item_uses)
        for name in getattr(item, "fixturenames", ()):
            uses |= FIXTURE_USES.get(name, set())
        info = getattr(item, "_fixtureinfo", None)
        for defs in (info.name2fixturedefs.values() if info else ()):
            for d in defs:
                uses |= getattr(d, _ATTR, set())
        marks = {k for k in HEAVY if item.get_closest_marker(k)}
        if self.report:
            with open(self.report, "a") as f:
                f.write(json.dumps({"nodeid": item.nodeid, "uses": sorted(uses), "marks": sorted(marks)}) + "\n")
            return
        missing = sorted(uses - marks)
        if missing:
            pytest.fail(f"{item.nodeid} used {', '.join(missing)} but is not marked "
                        f"{' '.join('@pytest.mark.' + m for m in missing)} (see docs/TESTING.md)", pytrace=False)


def register(config) -> None:
    mode = os.environ.get("SWIFTSAGE_MARK_AUDIT", "check")
    if mode != "off":
        config.pluginmanager.register(MarkAudit(mode), "swiftsage-mark-audit")
