"""Roads not taken: what would have happened had another action been played at one step of a recorded episode.

    python -m agent_core.rollout runs/EPISODE.jsonl --step 12 --action "open door to kitchen"
    python -m agent_core.rollout runs/EPISODE.jsonl --step 12            # the continuation policy's own choice

A rollout replays the episode's first K steps in a fresh JVM (the fork machinery: every observation and score is
checked against the record), plays the given action as step K+1 (or lets the policy choose it), then lets a
continuation policy play H more steps (`--horizon`, default 10) or to the episode's step limit. The default policy
is Swift alone (deterministic, no LLM); `own` is the episode's own preset. The result is an ordinary trace (its
header's `parent.branch` names the action, the policy and H) under `runs/rollouts/`, keyed by what decides it:
the recorded steps 1..K, the action, the policy, H, the code revision and the CPU's vector extensions. A rollout
asked for again is read back from there.

Rollouts are for measuring and showing, never for deciding: no part of the agent imports this module, and an
evaluated episode never looks ahead in a copy of the game (tests/test_rollout.py checks both).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import multiprocessing as mp
import os
import queue
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
ROLLOUTS_DIR = ROOT / "runs" / "rollouts"
DEFAULT_HORIZON = 10
POLICIES = ("swift", "own")  # Swift alone; the episode's own preset
HORIZON_END = "horizon"  # a rollout's summary reason when it stopped after its H steps

# how many rollouts this process has started: an evaluated episode must leave it at 0 (tests)
STARTED = 0


class RolloutError(ValueError):
    """A rollout that cannot be run as asked (no such step, an episode that already ended there, ...)."""


class RolloutCancelled(Exception):
    pass


@dataclass(frozen=True)
class RolloutRequest:
    trace: str  # the recorded episode
    step: int  # replay its steps 1..step, then branch
    action: str | None = None  # played as step + 1; None: the continuation policy chooses it
    policy: str = "swift"
    horizon: int = DEFAULT_HORIZON  # steps the policy plays after the branch's first action
    label: str = ""  # who proposed the action ("Sage's pick", "the dropped action"): shown, not part of the key

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Rollout:
    """A finished rollout, read from its trace."""

    request: RolloutRequest
    key: str
    path: str
    first_action: str  # what step + 1 played (after the last safeguard; the policy's own choice when none was given)
    start_score: float  # the score after step `request.step`
    scores: list[float] = field(default_factory=list)  # after each step of the branch, step + 1 onwards
    ended: str = HORIZON_END  # horizon | success | failure | step_limit
    cached: bool = False
    wall_s: float = 0.0
    commit: str = ""  # the code revision that played it

    @property
    def end_step(self) -> int:
        return self.request.step + len(self.scores)

    @property
    def final(self) -> float:
        return self.scores[-1] if self.scores else self.start_score

    @property
    def value(self) -> float:
        """The branch's outcome as the evaluation's Final counts it: a lost game (a negative score) is 0."""
        return max(0.0, self.final)

    def to_dict(self) -> dict[str, Any]:
        return {"request": self.request.to_dict(), "key": self.key, "path": self.path,
                "first_action": self.first_action, "start_score": self.start_score, "scores": list(self.scores),
                "ended": self.ended, "end_step": self.end_step, "final": self.final, "value": self.value,
                "cached": self.cached, "wall_s": round(self.wall_s, 3), "commit": self.commit}


def _revision() -> str:
    from .provenance import code_revision, machine

    code = code_revision()
    return json.dumps([code.get("commit", ""), code.get("diff", ""), machine().get("isa", "")])


def branch_point_digest(ep, step: int) -> str:
    """What the episode was up to `step`: the task, its start and every recorded action, observation and score.
    A live trace that grows keeps the digest of its earlier steps."""
    h = ep.header
    data = [h.task, h.variation, h.split, h.initial_look, h.seed,
            [(r.action, r.observation, r.score) for r in ep.steps[:step]]]
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def rollout_key(ep, req: RolloutRequest, revision: str | None = None) -> str:
    own = ep.header.config if req.policy == "own" else None  # the episode's own preset plays on
    data = [branch_point_digest(ep, req.step), req.step, req.action, req.policy, own, req.horizon,
            revision if revision is not None else _revision()]
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:20]


def check_request(ep, req: RolloutRequest) -> None:
    if req.policy not in POLICIES:
        raise RolloutError(f"unknown continuation policy {req.policy!r}; choose one of: {', '.join(POLICIES)}")
    if req.horizon < 0:
        raise RolloutError(f"horizon {req.horizon}: must be 0 or more")
    if not 0 <= req.step <= len(ep.steps):
        raise RolloutError(f"step {req.step}: the recorded episode has steps 0-{len(ep.steps)}")
    if req.step and ep.steps[req.step - 1].done:
        raise RolloutError(f"the recorded episode ended at step {req.step}: branch from an earlier step")
    if req.action is not None and not str(req.action).strip():
        raise RolloutError("an empty action")


def read_rollout(path: Path, req: RolloutRequest | None = None, cached: bool = True) -> Rollout | None:
    """A finished rollout's result from its trace; None when the trace is missing or unfinished."""
    from .trace import TraceError, read_episode

    try:
        ep = read_episode(path)
    except (TraceError, OSError, ValueError):
        return None
    if ep.summary is None or ep.summary.reason in ("stopped", "error"):
        return None
    info = ep.header.parent or {}
    branch = info.get("branch") or {}
    step = int(info.get("step", 0))
    if req is None:
        req = RolloutRequest(trace=str(info.get("trace", "")), step=step, action=branch.get("action"),
                             policy=branch.get("policy", "swift"), horizon=int(branch.get("horizon", DEFAULT_HORIZON)),
                             label=branch.get("label", ""))
    own = [r for r in ep.steps if not r.replayed]
    start = ep.steps[step - 1].score if step else (ep.steps[0].score - ep.steps[0].reward if ep.steps else 0.0)
    return Rollout(request=req, key=str(branch.get("key", "")), path=str(path),
                   first_action=own[0].action if own else "", start_score=float(start),
                   scores=[float(r.score) for r in own], ended=ep.summary.reason, cached=cached,
                   commit=str(branch.get("commit", "")))


class RolloutRunner:
    """Runs rollouts one after another in this process: one JVM (fresh for each rollout), Swift loaded once."""

    def __init__(self, out: str | Path = ROLLOUTS_DIR, llm=None):
        self.out = Path(out)
        self._swift: dict[str, Any] = {}
        self._llm = llm
        self._env = None
        self._revision: str | None = None

    def path_for(self, key: str) -> Path:
        return self.out / f"rollout-{key}.jsonl"

    def cached(self, ep, req: RolloutRequest) -> Rollout | None:
        return read_rollout(self.path_for(self._key(ep, req)), req)

    def _key(self, ep, req: RolloutRequest) -> str:
        if self._revision is None:
            self._revision = _revision()
        return rollout_key(ep, req, self._revision)

    def _config(self, ep, req: RolloutRequest):
        from .config import Config, preset

        if req.policy == "own":
            cfg = Config.from_dict(ep.header.config or {})
        else:
            cfg = preset("swift")
        parent_env = (ep.header.config or {}).get("env", {}) if isinstance(ep.header.config, dict) else {}
        cfg.env.step_limit = int(parent_env.get("step_limit", cfg.env.step_limit))
        cfg.env.fresh_jvm = True  # the replay must see what the recording saw
        return cfg

    def _agent(self, cfg, key: str):
        from .controller import Agent, load_swift
        from .env import ScienceWorld
        from .llm import make_backend

        skey = json.dumps([cfg.to_dict()["swift"], cfg.controller.sage_enabled], sort_keys=True)
        if skey not in self._swift:
            self._swift[skey] = load_swift(cfg)
        if self._llm is None:
            self._llm = make_backend(cfg.llm, seed=cfg.seed)
        if self._env is None:
            self._env = ScienceWorld(cfg.env)
        if cfg.amm.enabled:  # a scratch store: a rollout never writes into anyone's memory
            store = self.out / "stores" / key
            shutil.rmtree(store, ignore_errors=True)
            cfg.amm.store_dir = str(store)
        return Agent(cfg, self._swift[skey], self._llm, env=self._env, runs_dir=self.out, keep_llm_cache=False)

    def run(self, req: RolloutRequest, ep=None, cancel: threading.Event | None = None,
            on_step: Callable[[int, int], None] | None = None) -> Rollout:
        """The rollout `req` asks for: read back when cached, else played (and then cached)."""
        global STARTED
        from .episode import ReplayError
        from .trace import read_episode

        ep = ep if ep is not None else read_episode(req.trace)
        check_request(ep, req)
        key = self._key(ep, req)
        path = self.path_for(key)
        done = read_rollout(path, req)
        if done is not None:
            return done
        path.unlink(missing_ok=True)  # an unfinished one (a killed run) is played again
        STARTED += 1
        t0 = time.perf_counter()
        cfg = self._config(ep, req)
        agent = self._agent(cfg, key)
        from .provenance import code_revision

        branch = {"key": key, "action": req.action, "policy": req.policy, "horizon": req.horizon, "label": req.label,
                  "point": branch_point_digest(ep, req.step), "commit": code_revision().get("commit", "")[:12]}
        total = req.horizon + 1
        try:
            agent.fork(ep, req.step, branch=branch, run_id=path.stem)
            n = 0
            while not agent.done and n < total:
                if cancel is not None and cancel.is_set():
                    raise RolloutCancelled()
                agent.step(given=req.action if n == 0 else None)
                n += 1
                if on_step:
                    on_step(n, total)
            agent.finish(None if agent.done else HORIZON_END)
        except ReplayError as e:
            agent.finish("error", error=str(e))
            path.unlink(missing_ok=True)
            raise RolloutError(f"{req.trace} does not replay to step {req.step}: {e}") from e
        except BaseException:
            agent.finish("stopped")
            path.unlink(missing_ok=True)  # never a half rollout in the cache
            raise
        finally:
            if cfg.amm.enabled:
                shutil.rmtree(self.out / "stores" / key, ignore_errors=True)
        out = read_rollout(path, req, cached=False)
        if out is None:  # pragma: no cover - the trace was just closed with its summary
            raise RolloutError(f"the rollout's trace {path} could not be read back")
        out.wall_s = time.perf_counter() - t0
        return out

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def find_rollouts(dirs: Iterable[str | Path], ep, step: int | None = None, policy: str | None = None,
                  horizon: int | None = None) -> list[Rollout]:
    """The finished rollouts kept in `dirs` that branch from `ep` (at `step`, or at any step), whatever code
    revision played them (each names its own): found by what the episode was up to their branch point, so a copy
    of the episode elsewhere finds them too. Newest last; one per (step, action, policy, horizon)."""
    found: dict[tuple, Rollout] = {}
    points: dict[int, str] = {}
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            continue
        for path in sorted(d.glob("rollout-*.jsonl"), key=lambda p: p.stat().st_mtime):
            try:
                with path.open(encoding="utf-8") as f:
                    head = json.loads(f.readline())
            except (OSError, ValueError):
                continue
            info = (head.get("header", head) if isinstance(head, dict) else {}).get("parent") or {}
            branch = info.get("branch") or {}
            k = info.get("step")
            if (not isinstance(k, int) or not branch or info.get("run_id") != ep.header.run_id
                    or (step is not None and k != step) or not 0 <= k <= len(ep.steps)
                    or (policy is not None and branch.get("policy") != policy)
                    or (horizon is not None and branch.get("horizon") != horizon)):
                continue
            if k not in points:
                points[k] = branch_point_digest(ep, k)
            if branch.get("point") != points[k]:
                continue
            r = read_rollout(path)
            if r is not None:
                found[(k, r.request.action, r.request.policy, r.request.horizon)] = r
    return list(found.values())


# ----------------------------------------------------------------- many at once

def _worker(out: str, threads: int, jobs, results, parent: int) -> None:
    import torch

    from .evaluate.local import _exit_with_parent

    _exit_with_parent(parent)
    torch.set_num_threads(threads)
    os.environ["SWIFT_THREADS"] = str(threads)
    runner = RolloutRunner(out)
    try:
        while True:
            item = jobs.get()
            if item is None:
                break
            i, data = item
            try:
                results.put(("done", i, runner.run(RolloutRequest(**data)).to_dict()))
            except Exception as e:  # noqa: BLE001 - one rollout that fails is reported; the others go on
                results.put(("error", i, f"{type(e).__name__}: {e}"))
    finally:
        runner.close()
        results.put(("exit", None, None))


@dataclass
class Outcome:
    """One request's result: the rollout, or why there is none."""

    request: RolloutRequest
    rollout: Rollout | None = None
    error: str = ""


def _from_dict(d: dict[str, Any]) -> Rollout:
    return Rollout(request=RolloutRequest(**d["request"]), key=d["key"], path=d["path"],
                   first_action=d["first_action"], start_score=d["start_score"], scores=list(d["scores"]),
                   ended=d["ended"], cached=d["cached"], wall_s=d["wall_s"], commit=d.get("commit", ""))


def run_rollouts(requests: Sequence[RolloutRequest], workers: int = 1, out: str | Path = ROLLOUTS_DIR,
                 on_done: Callable[[int, int, Outcome], None] | None = None,
                 cancel: threading.Event | None = None, runner: RolloutRunner | None = None) -> list[Outcome]:
    """Every request's outcome, in order. Cached ones come back at once; the rest are played here (workers=1, on
    `runner` if given) or in `workers` spawned processes, each with its own JVM and Swift. `cancel` stops between
    rollouts (here: between steps); a cancelled rollout leaves nothing in the cache."""
    out = Path(out)
    outcomes = [Outcome(r) for r in requests]
    todo: list[int] = []
    probe = runner or RolloutRunner(out)
    episodes: dict[str, Any] = {}
    from .trace import TraceError, read_episode

    done = 0

    def report(i: int) -> None:
        nonlocal done
        done += 1
        if on_done:
            on_done(done, len(requests), outcomes[i])

    for i, req in enumerate(requests):
        try:
            ep = episodes.get(req.trace) or episodes.setdefault(req.trace, read_episode(req.trace))
            check_request(ep, req)
            hit = probe.cached(ep, req)
        except (RolloutError, TraceError, OSError) as e:
            outcomes[i].error = str(e)
            report(i)
            continue
        if hit is not None:
            outcomes[i].rollout = hit
            report(i)
        else:
            todo.append(i)
    if not todo:
        return outcomes
    if workers <= 1:
        own = probe
        try:
            for i in todo:
                if cancel is not None and cancel.is_set():
                    raise RolloutCancelled()
                try:
                    outcomes[i].rollout = own.run(requests[i], ep=episodes[requests[i].trace], cancel=cancel)
                except RolloutError as e:
                    outcomes[i].error = str(e)
                report(i)
        finally:
            if runner is None:
                own.close()
        return outcomes
    workers = min(workers, len(todo))
    threads = max(1, (os.cpu_count() or 1) // workers)
    ctx = mp.get_context("spawn")
    jq, rq = ctx.Queue(), ctx.Queue()
    for i in todo:
        jq.put((i, requests[i].to_dict()))
    for _ in range(workers):
        jq.put(None)
    procs = [ctx.Process(target=_worker, args=(str(out), threads, jq, rq, os.getpid()), daemon=True)
             for _ in range(workers)]
    for p in procs:
        p.start()
    exited = 0
    try:
        while exited < workers:
            if cancel is not None and cancel.is_set():
                raise RolloutCancelled()
            try:
                kind, i, payload = rq.get(timeout=0.5)
            except queue.Empty:
                if not any(p.is_alive() for p in procs):
                    break
                continue
            if kind == "exit":
                exited += 1
            elif kind == "done":
                outcomes[i].rollout = _from_dict(payload)
                report(i)
            else:
                outcomes[i].error = payload
                report(i)
    finally:
        for p in procs:
            if p.is_alive() and (cancel is not None and cancel.is_set() or exited < workers):
                p.terminate()
            p.join(timeout=10)
        # a worker killed mid-rollout leaves an unfinished trace: the cache never reads it back, the next run replaces it
    for o in outcomes:
        if o.rollout is None and not o.error:
            o.error = "not run (cancelled, or its worker stopped)"
    return outcomes


# ----------------------------------------------------------------- command line

def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m agent_core.rollout", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="the recorded episode (a .jsonl trace)")
    ap.add_argument("--step", type=int, required=True, help="replay steps 1..STEP, then branch")
    ap.add_argument("--action", action="append", default=None,
                    help="the action played as step STEP+1 (repeat for several branches; none: the policy's choice)")
    ap.add_argument("--policy", default="swift", choices=POLICIES, help="who plays on (default: Swift alone)")
    ap.add_argument("--horizon", type=int, default=DEFAULT_HORIZON, help="steps played after the branch's first")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=str(ROLLOUTS_DIR), help="where rollouts are kept (the cache)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    reqs = [RolloutRequest(args.trace, args.step, a, args.policy, args.horizon) for a in (args.action or [None])]

    def show(n: int, total: int, o: Outcome) -> None:
        r = o.rollout
        what = repr(o.request.action) if o.request.action else "the policy's choice"
        if r is None:
            print(f"[{n}/{total}] {what}: error: {o.error}", flush=True)
        else:
            print(f"[{n}/{total}] {what}: played {r.first_action!r}, score {r.start_score:g} -> {r.final:g} by step "
                  f"{r.end_step} ({r.ended}{', cached' if r.cached else f', {r.wall_s:.1f} s'}); trace {r.path}",
                  flush=True)

    try:
        outcomes = run_rollouts(reqs, workers=args.workers, out=args.out, on_done=show)
    except KeyboardInterrupt:
        print("cancelled", file=sys.stderr)
        return 130
    return 0 if all(o.rollout is not None for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
