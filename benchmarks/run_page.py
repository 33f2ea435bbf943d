"""How long the Run page takes per Swift step, apart from the agent's own work; and in a real browser, from a
click to the new step's header.

    .venv/bin/python benchmarks/run_page.py [--steps 30] [--task boil]
    .venv/bin/python benchmarks/run_page.py --browser [--steps 20] [--long TRACE]

--browser serves the app (`streamlit run`) and drives Debian's headless Chromium (Playwright): the quick demo
(Swift alone), Reset, then N Step clicks; for each click the time until the page's header names the new step
(click to header) and until Streamlit's run ends (click to settled). With --long (a trace of ~1,000 steps, e.g.
`python -m agent_core.run --task boil --variation 21 --preset swift --max-steps 1000`), also the time to open it
as a recorded episode and to move one step with the Next button.

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
    ap.add_argument("--browser", action="store_true", help="a real Chromium against `streamlit run`")
    ap.add_argument("--long", help="a long trace to open and step through in the browser")
    args = ap.parse_args()
    if args.browser:
        return browser(args)
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


def _p50(xs: list[float]) -> str:
    return f"{1e3 * statistics.median(xs):.0f} ms" if xs else "n/a"


def _timed(page, click, step: int, timeout_s: float = 60) -> tuple[float, float]:
    """Seconds from `click()` until the page's header names `step`, and until Streamlit's run has ended."""
    from tests.browser_util import wait_for_step, wait_idle

    t0 = time.perf_counter()
    click()
    wait_for_step(page, step, timeout_s)
    to_header = time.perf_counter() - t0
    wait_idle(page, timeout_s)
    return to_header, time.perf_counter() - t0


def browser(args) -> None:
    """Click to header and click to settled in Chromium (see the module's docstring)."""
    import shutil

    from tests.browser_util import click_button, chromium_page, open_live, served_app, wait_for_step, wait_idle

    runs = Path(tempfile.mkdtemp(prefix="run_page_browser_"))
    header, settled = [], []
    with served_app(runs, runs / "streamlit.log") as url, chromium_page() as page:
        page.goto(url)
        open_live(page)
        page.get_by_test_id("stSidebar").get_by_text("Quick demo: Swift alone").click()
        wait_idle(page)
        click_button(page, "Reset")
        wait_for_step(page, 0, 180)
        wait_idle(page)
        for k in range(1, args.steps + 1):
            to_header, to_settled = _timed(page, lambda: click_button(page, "Step"), k)
            header.append(to_header)
            settled.append(to_settled)
    print(f"{len(header)} Swift steps in Chromium: click to header p50 {_p50(header)} (max "
          f"{1e3 * max(header):.0f} ms), click to settled p50 {_p50(settled)}")
    if not args.long:
        return
    # the long trace alone in its runs folder, no examples: "Recorded episode" opens it
    long_runs = Path(tempfile.mkdtemp(prefix="run_page_long_"))
    shutil.copy(args.long, long_runs / Path(args.long).name)
    steps = sum(1 for line in Path(args.long).read_text().splitlines() if '"kind": "step"' in line)
    empty = Path(tempfile.mkdtemp(prefix="no_examples_"))
    with served_app(long_runs, long_runs / "streamlit.log", env={"SWIFTSAGE_EXAMPLES_DIR": str(empty)}) as url, \
            chromium_page() as page:
        page.goto(url)
        page.get_by_role("button", name="Reset", exact=True).wait_for(timeout=120_000)
        opened, opened_settled = _timed(
            page, lambda: page.get_by_test_id("stSidebar").get_by_text("Recorded episode", exact=True).click(), 0, 120)
        moves, moves_settled = [], []
        for k in range(1, 11):
            to_header, to_settled = _timed(page, lambda: page.get_by_role("button", name="Next ▶").click(), k)
            moves.append(to_header)
            moves_settled.append(to_settled)
    print(f"a {steps}-step trace: open to header {1e3 * opened:.0f} ms (settled {1e3 * opened_settled:.0f} ms); "
          f"Next to header p50 {_p50(moves)}, to settled p50 {_p50(moves_settled)}")


if __name__ == "__main__":
    main()
