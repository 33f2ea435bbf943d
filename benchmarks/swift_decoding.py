"""Swift's decoding, fast path against plain path, on the same recorded states (interleaved, so both see the
same machine load).

    .venv/bin/python benchmarks/swift_decoding.py [--steps 10]

States: the first `--steps` steps of every shipped example episode (assets/episodes), replayed in a real
ScienceWorld. At each state Swift's proposal is timed twice:
- fast (the shipped code): one cross-attention cache shared by every beam, and the unconstrained search batched
  with the valid ranking in one beam search;
- plain: Hugging Face's own cache (keys and values per beam, reordered every step) and two separate searches.
Prints the p50 of each, their ratio, and how often the two agree on the best valid action, on the unconstrained
top-1 and on the whole valid ranking.

    .venv/bin/python benchmarks/swift_decoding.py --parts

--parts times the shipped path only, at each state:
- a whole Swift step in two positions: right after the environment's step, as in an evaluation or an autoplay loop
  (the JVM's compiler threads are still busy for ~10 ms after a step on a fresh JVM, so Swift finds one core
  free), and after a 0.2 s pause, as after a Step click's page redraw (both cores free);
- its parts on the cores a step takes: the encoder, the batched beam search (unconstrained and valid ranking
  together), and the focus scoring (run in a step only when the best action is a `focus on`; timed here at every
  state), with the input length, the number of valid actions and the threads used.
Each state's valid actions are tokenized before the timings (a step mostly sees the actions of the step before).

    .venv/bin/python benchmarks/swift_decoding.py --profile

--profile: the shipped path over the same states in a loop (no game step between), then where its time goes, op by
op (torch.profiler, self CPU time) and by Python function (cProfile).

    .venv/bin/python benchmarks/swift_decoding.py --dump A.json            # at one revision
    .venv/bin/python benchmarks/swift_decoding.py --compare A.json         # at another: same choices? score change?

--dump / --compare: every state's proposal (best valid action, top-1, valid ranking, candidates, focus order and
their scores), for checking that a faster Swift chooses what the old one did.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--parts", action="store_true", help="time the shipped path's parts instead of fast vs plain")
    ap.add_argument("--dump", default=None, help="write every state's proposal (actions, scores, focus) to this JSON")
    ap.add_argument("--compare", default=None, help="compare the proposals with a --dump of another revision")
    ap.add_argument("--profile", action="store_true", help="profile the shipped path op by op over the states")
    args = ap.parse_args()

    from agent_core.config import preset
    from agent_core.controller import Agent, load_swift
    from agent_core.env import ScienceWorld
    from agent_core.llm import ScriptedBackend
    from agent_core.trace import list_traces, read_episode

    cfg = preset("baseline")
    cfg.controller.sage_enabled = False
    swift = load_swift(cfg)
    env = ScienceWorld()
    # the reference: the `scienceworld` package's own step on the same actions, in the same run (its own JVM env)
    from scienceworld import ScienceWorldEnv

    from agent_core.env import simplifications_for
    raw = ScienceWorldEnv("", envStepLimit=10 ** 6)
    raw_ms: list[float] = []
    fast_ms, plain_ms, same = [], [], {"action": 0, "top1": 0, "ranking": 0}
    parts: dict[str, list[float]] = {"whole step, in a loop (ms)": [], "threads (in a loop)": [],
                                     "whole step, after a pause (ms)": [], "threads (after a pause)": [],
                                     "encoder (ms)": [], "beam search (ms)": [], "focus scoring (ms)": [], "threads": [],
                                     "input tokens": [], "valid actions": []}
    n = 0
    dumped: list[dict] = []
    profiled: list[tuple[str, list[str]]] = []
    for path in list_traces(ROOT / "assets" / "episodes"):
        ep = read_episode(path)
        agent = Agent(cfg, swift, ScriptedBackend([]), env=env, runs_dir=Path(tempfile.mkdtemp(prefix="swiftdec_")))
        agent.start(ep.header.task, ep.header.variation, split=ep.header.split)
        raw.load(ep.header.task, ep.header.variation, simplifications_for(ep.header.task))
        raw.reset()
        for rec in ep.steps[:args.steps]:
            t0 = time.perf_counter()
            raw.step(rec.action)
            raw_ms.append(1e3 * (time.perf_counter() - t0))
            state, valid = agent.state.swift_state, agent.env.valid_actions()
            if args.profile:
                from agent_core.swift.format import swift_input

                profiled.append((swift_input(state, swift.k), list(valid)))
                obs = agent.env.step(rec.action)
                state.observe(rec.action, obs.text, obs.reward, obs.room, obs.score, obs.look, obs.inventory)
                continue
            if args.dump or args.compare:
                prop = swift.propose(state, valid)
                dumped.append({"state": f"{ep.header.task} v{ep.header.variation} step {rec.step}", "action": prop.action, "top1": prop.top1, "candidates": prop.candidates,
                               "valid_ranked": prop.valid_ranked, "focus": prop.focus})
                obs = agent.env.step(rec.action)
                state.observe(rec.action, obs.text, obs.reward, obs.room, obs.score, obs.look, obs.inventory)
                continue
            if args.parts:
                swift.model.targets(valid)
                t0 = time.perf_counter()
                swift.propose(state, valid)  # right after a step of the JVMs
                parts["whole step, in a loop (ms)"].append(1e3 * (time.perf_counter() - t0))
                parts["threads (in a loop)"].append(swift.model.last_threads)
                time.sleep(0.2)
                _time_parts(swift, state, valid, parts)
                obs = agent.env.step(rec.action)
                state.observe(rec.action, obs.text, obs.reward, obs.room, obs.score, obs.look, obs.inventory)
                continue
            t0 = time.perf_counter()
            fast = swift.propose(state, valid)
            t1 = time.perf_counter()
            swift.model.fast_decoding = False
            plain = swift.propose(state, valid)
            swift.model.fast_decoding = True
            t2 = time.perf_counter()
            fast_ms.append(1e3 * (t1 - t0))
            plain_ms.append(1e3 * (t2 - t1))
            same["action"] += bool(fast.valid_ranked and plain.valid_ranked) and \
                fast.valid_ranked[0][0] == plain.valid_ranked[0][0]
            same["top1"] += fast.top1 == plain.top1
            same["ranking"] += [a for a, _ in fast.valid_ranked] == [a for a, _ in plain.valid_ranked]
            n += 1
            obs = agent.env.step(rec.action)
            state.observe(rec.action, obs.text, obs.reward, obs.room, obs.score, obs.look, obs.inventory)
    if args.profile:
        _profile(swift.model, profiled)
        return
    if args.dump or args.compare:
        _dump_or_compare(dumped, args.dump, args.compare)
        return
    if args.parts:
        n = len(parts["encoder (ms)"])
        print(f"{n} states, p50 of each part (one process; Swift's threads: the free cores, at most SWIFT_THREADS "
              f"or every core):")
        for k, v in parts.items():
            print(f"  {k}: {statistics.median(v):.0f}" + (f" (mean {statistics.mean(v):.2f})" if "threads" in k else ""))
        raw_p50 = statistics.median(raw_ms)
        print(f"  raw scienceworld env.step (ms): {raw_p50:.0f}; whole Swift step / raw step: "
              f"{statistics.median(parts['whole step, in a loop (ms)']) / raw_p50:.2f} in a loop, "
              f"{statistics.median(parts['whole step, after a pause (ms)']) / raw_p50:.2f} after a pause")
        return
    pf, pp = statistics.median(fast_ms), statistics.median(plain_ms)
    pr = statistics.median(raw_ms)
    print(f"raw scienceworld env.step p50 {pr:.0f} ms; fast / raw {pf / pr:.2f}")
    print(f"{n} states: fast p50 {pf:.0f} ms, plain p50 {pp:.0f} ms, ratio {pf / pp:.2f}; same best valid action {same['action']}/{n}, "
          f"same top-1 {same['top1']}/{n}, same valid ranking {same['ranking']}/{n}")


def _dump_or_compare(props: list[dict], dump: str | None, compare: str | None) -> None:
    import json

    props = json.loads(json.dumps(props))  # tuples as lists, as they come back from a file
    if dump:
        Path(dump).write_text(json.dumps(props))
        print(f"{len(props)} states written to {dump}")
    if compare:
        by_state = {p["state"]: p for p in json.loads(Path(compare).read_text())}  # the traces' order may differ
        pairs = [(p, by_state[p["state"]]) for p in props if p["state"] in by_state]
        props, other, n = [a for a, _ in pairs], [b for _, b in pairs], len(pairs)
        names = lambda xs: [a for a, _ in xs]  # noqa: E731
        same = {k: sum(f(a) == f(b) for a, b in zip(props, other)) for k, f in (
            ("best valid action", lambda p: p["action"]), ("top-1", lambda p: p["top1"]),
            ("valid ranking", lambda p: names(p["valid_ranked"])), ("candidates", lambda p: names(p["candidates"])),
            ("focus order", lambda p: names(p["focus"])))}
        diff = max((abs(x - y) for a, b in zip(props, other) for key in ("valid_ranked", "focus")
                    for (_, x), (_, y) in zip(a[key], b[key])), default=0.0)
        print(f"{n} states against {compare}: " + ", ".join(f"same {k} {v}/{n}" for k, v in same.items())
              + f"; largest score difference {diff:.2g}")


def _profile(model, states: list[tuple[str, list[str]]]) -> None:
    import cProfile
    import io
    import pstats

    from torch.profiler import ProfilerActivity, profile

    def run() -> None:
        for text, valid in states:
            model.propose(text, valid)

    for _, valid in states:
        model.targets(valid)
    run()  # warm
    t0 = time.perf_counter()
    run()
    print(f"{len(states)} states: {1e3 * (time.perf_counter() - t0) / len(states):.1f} ms a state (a loop, no game step)")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    pr = cProfile.Profile()
    pr.enable()
    run()
    pr.disable()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("cumulative").print_stats(25)
    print(out.getvalue())


def _time_parts(swift, state, valid, parts: dict[str, list[float]]) -> None:
    from agent_core.swift.format import swift_input

    m = swift.model
    t0 = time.perf_counter()
    swift.propose(state, valid)
    t1 = time.perf_counter()
    parts["threads (after a pause)"].append(m.last_threads)
    with m._cores():  # the parts on the cores a whole step would take
        enc = m._encode(swift_input(state, swift.k))
        t2 = time.perf_counter()
        m._free_and_valid(enc, valid, swift.n)
        t3 = time.perf_counter()
        m.focus_scores(valid, enc)
        t4 = time.perf_counter()
    parts["threads"].append(m.last_threads)
    for k, v in (("whole step, after a pause (ms)", t1 - t0), ("encoder (ms)", t2 - t1), ("beam search (ms)", t3 - t2),
                 ("focus scoring (ms)", t4 - t3)):
        parts[k].append(1e3 * v)
    parts["input tokens"].append(int(enc["attention_mask"].sum()))
    parts["valid actions"].append(len(valid))


if __name__ == "__main__":
    main()
