"""How long the Run page takes per Swift step, apart from the agent's own work.

    .venv/bin/python benchmarks/run_page.py [--steps 30] [--task boil]

Drives the real Run page (Streamlit's AppTest, no browser) with the real Swift model and the real
ScienceWorld JVM, Sage switched off so every step is a Swift step, and clicks **Step** N times. For each
click it records the page's wall time and the agent's own step time (the step record's `timings.total`);
the difference is what the page costs (drawing every panel and chart from the records). The browser's own
drawing (Plotly in the page) comes on top and is not measured here. Prints medians by episode length.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--task", default="boil")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from streamlit.testing.v1 import AppTest

    from agent_core.config import apply_overrides
    from agent_core.controller import Agent, load_swift
    from agent_core.env import ScienceWorld, catalog
    from agent_core.llm import ScriptedBackend

    runs = Path(tempfile.mkdtemp(prefix="run_page_bench_"))
    os.environ["SWIFTSAGE_RUNS_DIR"] = str(runs)
    env = ScienceWorld()
    made: list[Agent] = []

    def factory(cfg):
        cfg = apply_overrides(cfg, {"controller.sage_enabled": False})
        agent = Agent(cfg, load_swift(cfg), ScriptedBackend([]), env=env, runs_dir=runs)
        made.append(agent)
        return agent

    at = AppTest.from_file(str(ROOT / "pages" / "0_Run.py"), default_timeout=300)
    at.session_state["agent_factory"] = factory
    at.run()
    at.selectbox(key="run_task").select(args.task).run()
    at.selectbox(key="run_variation").select(catalog().get(args.task).test[0]).run()
    at.number_input(key="run_step_limit").set_value(max(args.steps, 10)).run()
    at.button(key="run_reset").click().run()
    page, agent_s = [], []
    for _ in range(args.steps):
        agent = made[-1]
        if agent.done:
            break
        t0 = time.perf_counter()
        at.button(key="run_step").click().run()
        page.append(time.perf_counter() - t0)
        agent_s.append(agent.records[-1].timings.get("total", 0.0))
        assert not at.exception, at.exception
    env.close()
    over = [p - a for p, a in zip(page, agent_s)]
    half = len(page) // 2
    print(f"{len(page)} Swift steps on {args.task}: click p50 {1e3 * statistics.median(page):.0f} ms, agent step "
          f"p50 {1e3 * statistics.median(agent_s):.0f} ms, page overhead p50 {1e3 * statistics.median(over):.0f} ms "
          f"(first {half} steps {1e3 * statistics.median(over[:half]):.0f} ms, last {len(over) - half} steps "
          f"{1e3 * statistics.median(over[half:]):.0f} ms)")


if __name__ == "__main__":
    main()
