"""A shared memory on a real Chroma server (`chroma run`, bound to 127.0.0.1): the memory stream through
HttpClient (`memory.server_url`), a second client sees the first one's writes, and AMM runs an episode on
it; when the server goes away mid-run, every failed write and retrieval is recorded and the run goes on."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from agent_core.config import apply_overrides, preset
from agent_core.controller import Agent, load_swift
from agent_core.env import catalog
from agent_core.llm import ScriptedBackend
from agent_core.trace import read_episode
from memory_store import MemoryConfig, MemoryStream
from tests.browser_util import free_port, wait_for_http

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.server, pytest.mark.model]


class ChromaServer:
    def __init__(self, path: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(path.parent / "chroma.log", "w")
        self.proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "chroma"), "run", "--path", str(path), "--host",
                                      "127.0.0.1", "--port", str(self.port)], stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_http(f"{self.url}/api/v2/heartbeat", self.proc, path.parent / "chroma.log", 60, "chroma")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


@pytest.fixture()
def server(tmp_path):
    s = ChromaServer(tmp_path / "chroma-db")
    yield s
    s.kill()


def test_stream_on_a_chroma_server_is_shared(server):
    cfg = MemoryConfig(server_url=server.url, collection="shared-test")
    a = MemoryStream(cfg)
    assert a.remote and a.path == f"http://127.0.0.1:{server.port}/shared-test"
    for t, text in enumerate(["the thermometer is in the kitchen", "water boils at 100 degrees",
                              "the stove is in the kitchen; activate it to heat the pot"]):
        a.add(text, now=float(t), importance=5.0)
    b = MemoryStream(cfg)  # another app instance: same server, same collection
    assert len(b) == 3
    res = b.retrieve("where is the stove", now=10.0, k=2, trigger="user")
    assert [c.description for c in res.candidates][:1] == ["the stove is in the kitchen; activate it to heat the pot"]
    assert all(0 <= c.relevance <= 1 for c in res.candidates)


@pytest.mark.jvm
def test_amm_on_a_server_that_goes_away_mid_run(server, tmp_path):
    cfg = apply_overrides(preset("amm"), {"memory.server_url": server.url, "controller.sage_enabled": False,
                                          "env.step_limit": 14, "amm.reflection": "off"})
    agent = Agent(cfg, load_swift(cfg), ScriptedBackend([]), runs_dir=tmp_path / "runs")
    header = agent.start("boil", catalog().get("boil").test[0], split="test")
    assert header.memory_store.startswith(server.url) and header.memory_at_start["memories"] >= 200  # warm copy
    before = [agent.step() for _ in range(7)]
    served = [x for r in before for x in r.retrievals if x.result is not None]
    assert served and all(not x.error for r in before for x in r.retrievals)  # T1 retrievals through the server
    import chromadb

    remote = chromadb.HttpClient(host="127.0.0.1", port=server.port).get_collection("amm-agent")
    assert remote.count() == header.memory_at_start["memories"] + sum(
        1 for r in before for w in r.memories_written if w.id)
    server.kill()  # the shared memory goes away
    agent.run()
    ep = read_episode(agent.trace_path)
    agent.close()
    assert ep.summary.reason in ("step_limit", "failure", "success") and len(ep.steps) >= 8  # the run went on
    after = ep.steps[7:]
    failed = [x.error for r in after for x in r.retrievals] + [w.error for r in after for w in r.memories_written
                                                                if not w.duplicate_of]
    assert failed and all(e and "not answering" in e for e in failed)
    assert ep.summary.memory["errors"] >= len(failed)
