"""One worker's models and JVM, reused for every episode it plays; the same code runs in a local
process and in a Ray actor."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from ..trace import read_episode
from .metrics import episode_metrics
from .spec import TRACES, EvalSpec, Job, trace_path


def episode_state(path: Path) -> str:
    """done (a summary was written) | partial (the process died mid-episode) | missing."""
    if not path.exists():
        return "missing"
    try:
        ep = read_episode(path)
    except Exception:  # noqa: BLE001 - an unreadable trace is rerun like a half-written one
        return "partial"
    return "done" if ep.summary is not None else "partial"


def paired_start(out: Path, job: Job) -> str | None:
    """The starting look another preset's episode of this task-variation recorded (its header is written when it
    starts), or None. ScienceWorld now and then lists objects that share a name in another order (agent_core.env:
    same_lines_reordered); an episode that loads into the look its pair saw starts from the same listing."""
    for other in sorted(Path(out, TRACES).glob(f"*/{job.task}-v{job.variation}-*.jsonl")):
        if other.parent.name == job.preset or other.name != f"{job.task}-v{job.variation}-{other.parent.name}.jsonl":
            continue
        try:
            with open(other, encoding="utf-8") as f:
                look = json.loads(f.readline()).get("initial_look")
        except (OSError, ValueError, AttributeError):
            continue
        if look:
            return look
    return None


def set_aside(path: Path) -> Path | None:
    """Keep a half-written trace for inspection, out of the way of the rerun (not a *.jsonl any more)."""
    if not path.exists():
        return None
    n = 1
    while (dest := path.with_name(f"{path.name}.interrupted-{n}")).exists():
        n += 1
    path.rename(dest)
    return dest


def error_row(job: Job, error: str, trace: str = "") -> dict[str, Any]:
    """The metrics row of an episode that has no readable trace."""
    return {"preset": job.preset, "task": job.task, "task_index": -1, "variation": job.variation, "final": 0.0,
            "raw_final": 0.0, "success": False, "steps": 0, "reason": "error", "error": error, "trace": trace,
            "activity": {}, "seconds": 0.0}


class EpisodeRunner:
    """Loads Swift and the LLM backend once, starts one JVM, and plays episodes of any preset."""

    def __init__(self, spec: EvalSpec, out: str | Path, keep_stores: bool = False):
        self.spec, self.out, self.keep_stores = spec, Path(out), keep_stores
        self._swift: dict[str, Any] = {}
        self._agents: dict[str, Any] = {}
        self.env = None
        self.llm = None

    def agent(self, preset_name: str):
        if preset_name in self._agents:
            return self._agents[preset_name]
        from ..controller import Agent, load_swift
        from ..env import ScienceWorld
        from ..llm import make_backend

        cfg = self.spec.config(preset_name)
        if self.llm is None:  # one backend (one loaded model) for every preset: they share the LLM settings
            self.llm = make_backend(cfg.llm, seed=cfg.seed)
        if self.env is None:
            self.env = ScienceWorld(cfg.env)
        key = json.dumps([cfg.to_dict()["swift"], cfg.controller.sage_enabled], sort_keys=True)
        if key not in self._swift:
            self._swift[key] = load_swift(cfg)
        agent = Agent(cfg, self._swift[key], self.llm, env=self.env, runs_dir=self.out / "traces" / preset_name,
                      keep_llm_cache=False)  # an interrupted episode is played again from its start
        self._agents[preset_name] = agent
        return agent

    def run(self, job: Job) -> dict[str, Any]:
        """Play one episode into its trace (a half-written one is set aside first); returns its metrics row."""
        path = trace_path(self.out, job)
        set_aside(path)
        agent = self.agent(job.preset)
        store = None
        if agent.cfg.amm.enabled:  # a fresh copy of the preset's starting store (warm or empty) for this episode
            store = self.out / "stores" / job.preset / f"{job.task}-v{job.variation}"
            shutil.rmtree(store, ignore_errors=True)
            agent.cfg.amm.store_dir = str(store)
        t0 = time.perf_counter()
        error = None
        try:
            agent.start(job.task, job.variation, split=self.spec.split, run_id=job.run_id,
                        look=paired_start(self.out, job))
            agent.run()
        except Exception as e:  # noqa: BLE001 - recorded in the trace's summary; the evaluation goes on
            error = f"{type(e).__name__}: {e}"
            agent.finish("error", error=error)
        finally:
            agent.finish("stopped")
            if store is not None and not self.keep_stores:
                shutil.rmtree(store, ignore_errors=True)
        if not path.exists():  # the episode could not even start (its trace was never opened)
            return error_row(job, error or "no trace was written", str(path))
        row = episode_metrics(read_episode(path))
        row["wall_s"] = round(time.perf_counter() - t0, 3)
        return row

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
