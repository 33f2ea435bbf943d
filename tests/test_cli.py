"""The command-line runner: clear errors for bad input, and one real episode with the default models."""
from __future__ import annotations

import subprocess
import sys

import pytest

from agent_core.env import catalog
from agent_core.run import main
from agent_core.trace import read_episode


@pytest.mark.parametrize("argv, message", [
    (["--task", "boyl", "--variation", "0"], "unknown task 'boyl'"),
    (["--task", "boil", "--variation", "999"], "variation 999 is out of range"),
    (["--task", "boil", "--variation", "0", "--split", "test"], "is not a test variation"),
    (["--task", "boil", "--variation", "0", "--set", "swift.history_k=ten"], "expected an integer"),
])
def test_bad_input_is_a_clear_error(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_unknown_preset_is_rejected_by_the_parser():
    r = subprocess.run([sys.executable, "-m", "agent_core.run", "--task", "boil", "--variation", "0",
                        "--preset", "turbo"], capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice: 'turbo'" in r.stderr


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.slow
def test_full_episode_with_the_embedded_default_models(tmp_path):
    """Swift (shipped checkpoint) + Sage on Qwen2.5-Coder-1.5B, a short task, from the CLI."""
    info = catalog().get("lifespan-longest-lived")
    var = info.test[0]
    r = subprocess.run([sys.executable, "-m", "agent_core.run", "--task", info.name, "--variation", str(var),
                        "--split", "test", "--llm", "embedded", "--max-steps", "12", "--runs-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "step   1 [" in r.stdout and "final score" in r.stdout
    traces = list(tmp_path.glob("*.jsonl"))
    assert len(traces) == 1
    ep = read_episode(traces[0])
    assert ep.summary is not None and ep.summary.steps == len(ep.steps) >= 1
    assert ep.summary.reason in ("success", "failure", "step_limit")
    assert ep.header.models["sage"].startswith("embedded:Qwen2.5-Coder-1.5B")
