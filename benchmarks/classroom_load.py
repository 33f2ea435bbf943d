"""A classroom on one machine: the teacher runs an episode while followers watch it live and others scrub.

    .venv/bin/python benchmarks/classroom_load.py                       # 30 followers + 5 scrubbers, both scenarios
    .venv/bin/python benchmarks/classroom_load.py --scenario quick --followers 5 --scrubbers 0 --steps 15

Loopback only. The app is served in share mode (`SWIFTSAGE_SHARE=1`) with a teacher passcode. The **teacher** is
one headless Chromium page (Debian's chromium through Playwright) that unlocks the controls and presses
**Run N steps** on the Run page's defaults (boil, test variation 21, Baseline), so the agent runs inside the
server as it does in class. **Followers** and **scrubbers** are light clients of Streamlit's websocket protocol
(tests/st_client.py, all on one asyncio loop in this process): a follower opens the class link (`?follow=live`) and
reruns its polling fragment when the server asks, as a browser does; a scrubber opens a shipped recorded episode
and moves to another step every few seconds (`?trace=...&step=k`).

Each scenario runs the same episode twice: alone (the teacher only) and with the class. Reported, per scenario:
- the teacher's step time: the agent's own time per step (the step record's `timings.total`) and the wall time
  between two steps landing in the trace (it includes the teacher page's redraw), median and mean, and the ratio
  class / alone (goal: at most 1.2);
- the delay from a step landing in the trace to a follower receiving its header, over every (follower, step) seen
  (goal: p95 under 2 s); a follower at live that polls once a second may skip a step that was followed by another
  within the same second (it then shows the newer one), so the number of (follower, step) pairs seen is reported;
- a scrubber's response time (request to the end of the script run);
- the server's CPU seconds (the Streamlit process and its JVM), this process's (the websocket clients), and the
  teacher's Chromium's, apart, since all share the machine's cores;
- the server's memory per class session: (resident memory with the class - alone) / sessions;
- errors: exceptions shown on pages, dropped connections, Tracebacks in the server log (goal: none).

Scenarios: `embedded` (the embedded default LLM: Sage calls of ~15 s, steps every few seconds) and `quick` (Swift
alone, no model: a step every ~0.5 s, the hardest case for followers).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser_util import (chromium_page, click_button, served_app, set_number,  # noqa: E402
                                unlock_live_run, wait_idle)
from tests.st_client import Session, run_sessions  # noqa: E402

PASS = "bench-pass"
TICK = os.sysconf("SC_CLK_TCK")
EXAMPLES = sorted((ROOT / "assets" / "episodes").glob("*.jsonl"))


# ----------------------------------------------------------------------------- processes

def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    return kids


def _tree(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def cpu_s(pids: list[int]) -> float:
    total = 0
    for p in pids:
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total / TICK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def server_pid(port: int) -> int:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"streamlit" in b" ".join(cmd) and str(port).encode() in cmd:
                return int(d.name)
    raise RuntimeError(f"no streamlit process on port {port}")


# ----------------------------------------------------------------------------- the trace, as it lands

class TraceWatch(threading.Thread):
    """Notes when each step line lands in the newest trace of the runs folder (polls every 20 ms)."""

    def __init__(self, runs: Path):
        super().__init__(daemon=True)
        self.runs, self.landed, self.stop = runs, {}, threading.Event()
        self.path: Path | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            found = sorted(self.runs.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
            if found:
                self.path = found[-1]
                n = self.path.read_bytes().count(b'{"kind": "step"')
                now = time.time()
                for k in range(1, n + 1):
                    self.landed.setdefault(k, now)
            time.sleep(0.02)

    def steps(self) -> list[dict]:
        if self.path is None:
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()
                if line.startswith('{"kind": "step"')]


# ----------------------------------------------------------------------------- one run of the episode

class Scrubber(Session):
    """Opens a recorded episode and moves to a random step every `every` seconds; notes each response time."""

    async def scrub(self, stop: asyncio.Event, trace: str, steps: int, every: float) -> None:
        self.responses: list[float] = []
        await asyncio.wait_for(self.connected.wait(), 120)
        while not stop.is_set():
            await asyncio.sleep(every * random.uniform(0.7, 1.3))
            before = self.runs_finished
            t0 = time.monotonic()
            if not await self.send_rerun(query=f"trace={trace}&step={random.randint(0, steps)}"):
                return
            while self.runs_finished == before and not stop.is_set() and time.monotonic() - t0 < 30:
                await asyncio.sleep(0.02)
            if self.runs_finished > before:
                self.responses.append(time.monotonic() - t0)


async def _class(url: str, followers: int, scrubbers: int, scrub_every: float, stop: asyncio.Event,
                 ready: threading.Event) -> tuple[list[Session], list[Scrubber]]:
    fol = [Session(url, "follow=live", name=f"follower{i}") for i in range(followers)]
    scr = []
    for i in range(scrubbers):
        ex = EXAMPLES[i % len(EXAMPLES)]
        n = ex.read_text().count('{"kind": "step"')
        scr.append((Scrubber(url, f"trace={ex}&step=0", name=f"scrubber{i}"), str(ex), n))
    tasks = [asyncio.create_task(run_sessions(fol + [s for s, _, _ in scr], stop, stagger_s=0.2))]
    tasks += [asyncio.create_task(s.scrub(stop, ex, n, scrub_every)) for s, ex, n in scr]
    for s in fol + [s for s, _, _ in scr]:
        await asyncio.wait_for(s.connected.wait(), 120)
    await asyncio.sleep(3)  # every first page drawn
    ready.set()
    await asyncio.gather(*tasks)
    return fol, [s for s, _, _ in scr]


def one_run(scenario: str, steps: int, followers: int, scrubbers: int, scrub_every: float, tmp: Path,
            label: str) -> dict:
    runs = tmp / f"runs-{scenario}-{label}"
    env = {"SWIFTSAGE_SHARE": "1", "SWIFTSAGE_PASSCODE": PASS}
    log = tmp / f"server-{scenario}-{label}.log"
    result: dict = {"scenario": scenario, "label": label, "followers": followers, "scrubbers": scrubbers}
    with served_app(runs, log, env=env) as url, chromium_page() as page:
        spid = server_pid(int(url.rsplit(":", 1)[1]))
        me = os.getpid()
        # the class connects first (as students open the link before the lesson starts)
        stop, ready = asyncio.Event(), threading.Event()
        box: dict = {}
        loop = asyncio.new_event_loop()

        def class_thread() -> None:
            asyncio.set_event_loop(loop)
            try:
                box["out"] = loop.run_until_complete(_class(url, followers, scrubbers, scrub_every, stop, ready))
            except Exception as e:  # noqa: BLE001 - reported with the results
                box["error"] = f"the class's clients failed: {type(e).__name__}: {e}"
                ready.set()

        th = threading.Thread(target=class_thread, daemon=True)
        if followers or scrubbers:
            th.start()
            ready.wait(300)
        # the teacher: unlock, live run, (quick demo), reset, run N steps
        unlock_live_run(page, url, PASS)
        side = page.get_by_test_id("stSidebar")
        if scenario == "quick":
            side.get_by_text("Quick demo: Swift alone").click()
            wait_idle(page)
        set_number(page, "Step limit", steps)
        set_number(page, "N steps", steps)
        click_button(page, "Reset")
        page.wait_for_function("() => [...document.querySelectorAll('h3')].some(e => e.innerText.startsWith("
                               "'Step 0 ·'))", timeout=300_000)
        wait_idle(page, 300)
        watch = TraceWatch(runs)
        watch.start()
        rss0 = rss_mb(spid)
        server = set(_tree(spid))  # the server is this process's child too: its tree is counted apart

        def browser_cpu() -> float:  # Playwright's driver and Chromium: this process's other children
            return cpu_s([p for p in _tree(me) if p != me and p not in server and p not in set(_tree(spid))])

        cpu0 = {"server": cpu_s(_tree(spid)), "clients": resource.getrusage(resource.RUSAGE_SELF),
                "chromium": browser_cpu()}
        t0 = time.time()
        click_button(page, f"Run {steps} steps")
        deadline = time.time() + 1800
        while time.time() < deadline:
            recs = watch.steps()
            if len(recs) >= steps or (recs and recs[-1].get("done")):
                break
            time.sleep(0.5)
        wall = time.time() - t0
        time.sleep(6)  # the last poll and redraw
        ru = resource.getrusage(resource.RUSAGE_SELF)
        result["cpu_s"] = {
            "server": round(cpu_s(_tree(spid)) - cpu0["server"], 1),
            "ws_clients": round(ru.ru_utime + ru.ru_stime - cpu0["clients"].ru_utime - cpu0["clients"].ru_stime, 1),
            "teacher_chromium": round(browser_cpu() - cpu0["chromium"], 1)}
        result["server_rss_mb"] = {"before_run": round(rss0, 1), "after_run": round(rss_mb(spid), 1)}
        result["wall_s"] = round(wall, 1)
        loop.call_soon_threadsafe(stop.set)
        if th.is_alive():
            th.join(120)
        watch.stop.set()
    recs = watch.steps()
    result["actions"] = [r["action"] for r in recs]
    result["agent_step_s"] = [round(r["timings"].get("total", 0.0), 3) for r in recs]
    landed = [watch.landed[k] for k in sorted(watch.landed)]
    result["wall_step_s"] = [round(b - a, 3) for a, b in zip(landed, landed[1:])]
    result["sage_calls"] = sum(1 for r in recs if r["system"] == "sage")
    fol, scr = box.get("out", ([], []))
    delays = [t - watch.landed[k] for f in fol for k, t in f.steps_seen.items() if k in watch.landed
              and k >= 1 and t >= watch.landed[k] - 0.5]
    result["follower_delay_s"] = sorted(round(d, 3) for d in delays)
    result["pairs_seen"] = len(delays)
    result["pairs_possible"] = len(fol) * len(recs)
    result["followers_at_last_step"] = sum(1 for f in fol if f.steps_seen and max(f.steps_seen) == len(recs))
    result["followers_last_seen"] = [max(f.steps_seen) if f.steps_seen else None for f in fol]
    result["scrub_response_s"] = sorted(round(x, 3) for s in scr for x in getattr(s, "responses", []))
    result["errors"] = [e for s in fol + scr for e in s.errors] + ([box["error"]] if "error" in box else [])
    result["runs_per_session"] = [s.runs_finished for s in fol + scr]
    result["server_tracebacks"] = log.read_text().count("Traceback")
    return result


def _q(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(alone: dict, loaded: dict) -> dict:
    def med(x):
        return round(statistics.median(x), 3) if x else None

    def mean(x):
        return round(statistics.fmean(x), 3) if x else None

    sessions = loaded["followers"] + loaded["scrubbers"]
    return {
        "scenario": loaded["scenario"], "steps": len(loaded["actions"]), "sage_calls": loaded["sage_calls"],
        "same_actions": alone["actions"] == loaded["actions"],
        "agent_step_median_s": [med(alone["agent_step_s"]), med(loaded["agent_step_s"])],
        "agent_step_mean_s": [mean(alone["agent_step_s"]), mean(loaded["agent_step_s"])],
        "agent_step_mean_ratio": round(mean(loaded["agent_step_s"]) / mean(alone["agent_step_s"]), 3),
        "wall_step_median_s": [med(alone["wall_step_s"]), med(loaded["wall_step_s"])],
        "wall_step_mean_s": [mean(alone["wall_step_s"]), mean(loaded["wall_step_s"])],
        "wall_step_mean_ratio": round(mean(loaded["wall_step_s"]) / mean(alone["wall_step_s"]), 3),
        "follower_delay_p50_s": _q(loaded["follower_delay_s"], 0.5),
        "follower_delay_p95_s": _q(loaded["follower_delay_s"], 0.95),
        "follower_delay_max_s": _q(loaded["follower_delay_s"], 1.0),
        "pairs_seen": f"{loaded['pairs_seen']} of {loaded['pairs_possible']}",
        "followers_at_last_step": f"{loaded['followers_at_last_step']} of {loaded['followers']}",
        "scrub_response_p50_s": _q(loaded["scrub_response_s"], 0.5),
        "scrub_response_p95_s": _q(loaded["scrub_response_s"], 0.95),
        "scrubs": len(loaded["scrub_response_s"]),
        "cpu_s_alone": alone["cpu_s"], "cpu_s_class": loaded["cpu_s"],
        "rss_mb_alone": alone["server_rss_mb"], "rss_mb_class": loaded["server_rss_mb"],
        "mb_per_session": round((loaded["server_rss_mb"]["after_run"] - alone["server_rss_mb"]["after_run"])
                                / max(1, sessions), 1),
        "errors": len(loaded["errors"]) + len(alone["errors"]) + loaded["server_tracebacks"]
        + alone["server_tracebacks"],
        "error_samples": (loaded["errors"] + alone["errors"])[:5],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", choices=["embedded", "quick", "both"], default="both")
    ap.add_argument("--followers", type=int, default=30)
    ap.add_argument("--scrubbers", type=int, default=5)
    ap.add_argument("--scrub-every", type=float, default=3.0, help="seconds between a scrubber's moves (about)")
    ap.add_argument("--steps", type=int, default=0, help="steps per episode (default: 20 embedded, 40 quick)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "classroom_load.json"))
    args = ap.parse_args()
    random.seed(0)
    scenarios = ["quick", "embedded"] if args.scenario == "both" else [args.scenario]
    report = {"command": " ".join(sys.argv), "runs": [], "summary": []}
    with tempfile.TemporaryDirectory(prefix="classroom_") as tmp:
        for sc in scenarios:
            steps = args.steps or (20 if sc == "embedded" else 40)
            alone = one_run(sc, steps, 0, 0, args.scrub_every, Path(tmp), "alone")
            print(f"[{sc}] alone: {len(alone['actions'])} steps in {alone['wall_s']} s", flush=True)
            loaded = one_run(sc, steps, args.followers, args.scrubbers, args.scrub_every, Path(tmp), "class")
            print(f"[{sc}] class: {len(loaded['actions'])} steps in {loaded['wall_s']} s", flush=True)
            report["runs"] += [alone, loaded]
            s = summary(alone, loaded)
            report["summary"].append(s)
            print(json.dumps(s, indent=1), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
