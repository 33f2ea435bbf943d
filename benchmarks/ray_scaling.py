"""Evaluation on Ray: episodes per minute against the number of workers, when the LLM's wait is the cost.

    unshare -n sh -c 'ip link set lo up && exec .venv/bin/python benchmarks/ray_scaling.py' \
        [--workers 1 2 4 8] [--delay 1.0] [--tasks 0 5 9 13 17 22 25 29] [--variations 2] [--max-steps 20]

Ray binds this machine's outward address unless it runs in a network namespace with only loopback, so the whole
benchmark runs inside `unshare -n` (as root), as the Ray test does.

What it measures: `python -m agent_core.evaluate --backend ray --workers N` on the same episodes for each N, with
the Baseline preset talking to an OpenAI-compatible stand-in on 127.0.0.1 that answers every call after `--delay`
seconds, without using a core (a GPU vLLM server's latency, e.g. ~1 s for a 7B model's plan; the real server
is in docs/EVALUATION.md's recipe). Sage is made to act on most steps (`controller.stuck_window=1`, no streak
limit), so an episode is mostly waiting on the LLM, as a full-protocol evaluation on a GPU server is. Prints, for
each N, episodes per minute two ways, each with its speed-up over 1 worker and its ratio to linear:
- overall: the whole command's wall time, starting Ray and the workers (each loads Swift) included, as a real
  run's is;
- steady: from the traces' start and end times, each worker's episodes over the time from its first episode's
  start to its last one's end, summed over the workers: what a long evaluation (271 episodes x 4 presets) sees
  once its workers are up, without their start-up or the last minutes when some have run out of episodes.
Every episode starts its own fresh JVM (the protocol's `env.fresh_jvm`); the steady rate leaves out each worker's
first one with its start-up (a trace starts after its JVM's), so give every worker several episodes
(`--variations`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere: spans_of reads traces with agent_core
PLAN = ("Q1: The task needs the objects named in it; look around the rooms.\nQ2: None collected yet.\n"
        "Q3: Find the object first.\nQ4: Go to the room that has it.\nQ5: No mistake so far.")


def serve(delay: float) -> tuple[ThreadingHTTPServer, dict]:
    """The stand-in server: /v1/models, /tokenize (no tokens: Sage then generates its pick), and chat completions
    answered after `delay` seconds (a plan for a plan prompt, else the first listed option)."""
    stats = {"calls": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": "stand-in", "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path.endswith("/tokenize"):
                return self._send({"tokens": [], "count": 0})
            time.sleep(delay)
            stats["calls"] += 1
            text = json.dumps(body.get("messages") or body.get("prompt") or "")
            reply = PLAN if "Q5" in text else "1"
            self._send({"id": "x", "object": "chat.completion", "model": "stand-in",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": len(reply) // 4}})

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, stats


def steady_rate(spans: list[tuple[float, float]], workers: int) -> float | None:
    """Episodes per minute with every worker playing, from the episodes' (start, end) times: the episodes are laid
    back into `workers` lanes (each in turn goes to the lane whose last episode ended latest before it started: a
    worker plays one episode at a time), and each lane's rate counts from its first episode's start to its last
    one's end, so a worker's own start-up (Ray's actor, Swift) is out and every later JVM start is in. None when
    the spans do not fit the lanes."""
    lanes: list[list[tuple[float, float]]] = []
    for s, e in sorted(spans):
        free = [ln for ln in lanes if ln[-1][1] <= s]
        if free:
            max(free, key=lambda ln: ln[-1][1]).append((s, e))
        elif len(lanes) < workers:
            lanes.append([(s, e)])
        else:
            return None
    rates = [len(ln) / (ln[-1][1] - ln[0][0]) for ln in lanes if ln[-1][1] > ln[0][0]]
    return 60 * sum(rates) if rates else None


def spans_of(results: dict) -> list[tuple[float, float]]:
    """Each finished episode's (start, end) wall-clock times, from its trace's header and summary."""
    from agent_core.trace import read_episode

    out = []
    for e in results.get("episodes", []):
        if e.get("error") or not e.get("trace"):
            continue
        ep = read_episode(e["trace"])
        if ep.summary is not None and ep.summary.ended_at:
            out.append((ep.header.started_at, ep.summary.ended_at))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--delay", type=float, default=1.0, help="seconds the stand-in LLM takes per call")
    ap.add_argument("--tasks", nargs="+", default=["0", "5", "9", "13", "17", "22", "25", "29"])
    ap.add_argument("--variations", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=20)
    ap.add_argument("--out", default=None, help="keep the evaluations here (default: a temp dir)")
    args = ap.parse_args()
    srv, stats = serve(args.delay)
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="ray_scaling_"))
    n_eps = len(args.tasks) * args.variations
    print(f"{os.cpu_count()} CPUs; {n_eps} episodes (Baseline, {args.max_steps} steps), stand-in LLM {args.delay:g} s "
          f"a call on {url}")
    rate: dict[int, float] = {}
    steady: dict[int, float | None] = {}
    for w in args.workers:
        out = root / f"w{w}"
        calls0 = stats["calls"]
        cmd = [sys.executable, "-m", "agent_core.evaluate", "--out", str(out), "--presets", "baseline",
               "--tasks", *args.tasks, "--variations", str(args.variations), "--max-steps", str(args.max_steps),
               "--backend", "ray", "--workers", str(w), "--quiet",
               "--set", "llm.backend=openai", "--set", f"llm.base_url={url}", "--set", "llm.model=stand-in",
               "--set", "controller.stuck_window=1", "--set", "controller.sage_streak_limit=0"]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - t0
        if r.returncode:
            sys.exit(f"{w} workers failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        results = json.loads((out / "results.json").read_text())
        done = sum(1 for e in results.get("episodes", []) if not e.get("error"))
        rate[w] = 60 * done / wall
        steady[w] = steady_rate(spans_of(results), w)
        w0 = args.workers[0]
        base = rate[w0] / w0
        line = (f"{w} worker(s): {done}/{n_eps} episodes in {wall:.0f} s; {stats['calls'] - calls0} LLM calls; "
                f"overall {rate[w]:.2f} episodes/min, speed-up {rate[w] / rate[w0]:.2f}x, "
                f"{rate[w] / (base * w):.2f} of linear")
        if steady[w] and steady[w0]:
            line += (f"; steady {steady[w]:.2f} episodes/min, speed-up {steady[w] / steady[w0]:.2f}x, "
                     f"{steady[w] / (steady[w0] / w0 * w):.2f} of linear")
        print(line, flush=True)
    srv.shutdown()


if __name__ == "__main__":
    main()
