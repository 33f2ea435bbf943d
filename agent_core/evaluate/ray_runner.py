"""The same episodes as Ray actors on a local or remote Ray cluster (`--backend ray [--address ...]`).

Each actor owns one JVM, one Swift and one LLM backend (like a local worker process) and plays one episode
at a time into a scratch directory on its own node; the trace comes back to the driver, which writes it
into the evaluation directory. So the results are the same files, read the same way, as with local
workers; resume works per episode. Every node needs this project at the same path with its .venv
(see docs/EVALUATION.md)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from .spec import EvalSpec, Job, trace_path

ROOT = Path(__file__).resolve().parents[2]


def _actor_class(ray):
    @ray.remote(num_cpus=1)
    class EpisodeActor:
        def __init__(self, spec_json: dict[str, Any], threads: int):
            import torch

            from agent_core.evaluate.runner import EpisodeRunner

            torch.set_num_threads(threads)
            os.environ["SWIFT_THREADS"] = str(threads)  # Swift's cap: this actor's share of the cores
            self.scratch = Path(tempfile.mkdtemp(prefix="swiftsage_ray_"))
            self.runner = EpisodeRunner(EvalSpec.from_json(spec_json), self.scratch)

        def run(self, item: tuple[str, str, int]) -> tuple[dict[str, Any], str]:
            import socket

            from agent_core.evaluate.runner import error_row

            job = Job(*item)
            try:
                row = self.runner.run(job)
            except Exception as e:  # noqa: BLE001 - reported like any failed episode
                row = error_row(job, f"{type(e).__name__}: {e}")
            path = trace_path(self.scratch, job)
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            path.unlink(missing_ok=True)
            row["node"] = socket.gethostname()
            return row, text

    return EpisodeActor


def run_ray(spec: EvalSpec, out: Path, jobs: list[Job], workers: int, on_row: Callable[[dict], None],
            address: str | None = None, threads: int = 1) -> None:
    import ray
    from ray.util import ActorPool

    from ..trace import read_episode
    from .metrics import episode_metrics

    if not jobs:
        return
    env = {"env_vars": {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                        "ANONYMIZED_TELEMETRY": "False"}}
    init: dict[str, Any] = {"runtime_env": env, "include_dashboard": False, "log_to_driver": False,
                            "ignore_reinit_error": True}
    if address:
        init["address"] = address
    else:  # a local cluster just for this evaluation
        init["num_cpus"] = max(1, workers)
    ray.init(**init)
    try:
        cls = _actor_class(ray)
        n = max(1, min(workers, len(jobs)))
        actors = [cls.remote(spec.to_json(), threads) for _ in range(n)]
        pool = ActorPool(actors)
        items = [(j.preset, j.task, j.variation) for j in jobs]
        for row, text in pool.map_unordered(lambda a, it: a.run.remote(it), items):
            job = Job(row["preset"], row["task"], row["variation"])
            dest = trace_path(out, job)
            if text:
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp = dest.with_name(dest.name + ".tmp")
                tmp.write_text(text, encoding="utf-8")
                tmp.replace(dest)  # a trace appears whole or not at all
                node, wall = row.get("node"), row.get("wall_s")
                row = episode_metrics(read_episode(dest))  # paths as the driver sees them
                row["node"], row["wall_s"] = node, wall
            on_row(row)
    finally:
        ray.shutdown()
