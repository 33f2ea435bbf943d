"""tests/marks.py, the check that keeps the test tiers honest (docs/TESTING.md): it watches what it claims to
watch, it recognises the heavy subprocesses, and a test that used something heavy without the mark fails."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import marks

ROOT = Path(__file__).resolve().parent.parent


def test_every_watched_function_exists():
    assert marks.WATCH_MISSING == [], "moved or renamed: update tests/marks.py so that it watches them again"


@pytest.mark.parametrize("argv, kinds", [
    (["/usr/bin/java", "-classpath", "py4j.jar:scienceworld.jar", "py4j.GatewayServer"], {"jvm"}),
    (["java", "-version"], {"jvm"}),
    ([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", "8501"], {"server"}),
    (["bash", "scripts/app.sh", "--port", "8501"], {"server"}),
    ([sys.executable, "-m", "llama_cpp.server", "--model", "m.gguf"], {"server"}),
    (["bash", "scripts/vllm_server.sh", "--model", "smollm2-135m"], {"server"}),
    (["/work/.venv/bin/chroma", "run", "--path", "db"], {"server"}),
    (["/x/lib/python3.11/site-packages/ray/core/src/ray/gcs/gcs_server", "--port=0"], {"server"}),
    (["/x/site-packages/playwright/driver/node", "/x/site-packages/playwright/driver/package/cli.js", "run-driver"],
     {"browser"}),
    ([sys.executable, "-m", "agent_core.run", "--task", "boil"], set()),  # inside it: not seen (mark by reading)
    ("ls -l", set()),
    ([], set()),
])
def test_subprocesses_are_classified(argv, kinds):
    assert marks._classify(argv) == kinds


def test_the_audit_hook_sees_a_subprocess_start():
    seen: set[str] = set()
    saved = marks._sinks[:]
    marks._sinks[:] = [seen]  # this test's own sink only: the check must not charge the browser to this test
    try:
        subprocess.run([sys.executable, "-c", "pass", "run-driver"], check=True, timeout=60)
    finally:
        marks._sinks[:] = saved
    assert seen == {"browser"}


def test_a_test_that_used_a_jvm_without_the_mark_fails(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    jvm: starts the JVM\n")
    (tmp_path / "conftest.py").write_text("from tests import marks\n\n\ndef pytest_configure(config):\n"
                                          "    marks.register(config)\n")
    (tmp_path / "test_x.py").write_text(textwrap.dedent('''
        import pytest
        from tests import marks


        @pytest.fixture(scope="module")
        def jvm_once():
            marks._note("jvm")  # what the audit hook does when py4j starts `java`


        def test_unmarked(jvm_once):
            pass


        @pytest.mark.jvm
        def test_marked(jvm_once):
            pass


        def test_unmarked_later_user(jvm_once):  # the fixture's JVM was started for an earlier test
            pass


        def test_plain():
            pass
    '''))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWIFTSAGE_MARK_AUDIT": "check"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rE",
                        str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    # a test that fails at teardown counts as passed (its call) and as an error (its teardown)
    assert r.returncode == 1 and "4 passed, 2 errors in" in out, out[-3000:]
    assert "test_x.py::test_unmarked used jvm but is not marked @pytest.mark.jvm" in out
    assert "test_x.py::test_unmarked_later_user used jvm but is not marked @pytest.mark.jvm" in out
