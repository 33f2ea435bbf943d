"""What AMM's hints (T4) do to Sage's choice, one decision at a time, on dev variations (never test ones).

Episode-level pairs are too noisy to say whether the hints help (a paired Final difference has an SD of ~30). This
study asks the narrower question at each Sage call of a +AMM episode: Sage is asked three times at the same state,
with the T4 block as the agent sends it ("all"), with only the records whose action names objects in view
("in_view", the rule Swift's T1 memory already follows), and with no block ("none"). The agent plays on with
"all", as +AMM does. Where the picks differ, each pick is judged by what follows it: the episode is forked just
before the call's step (the game replays the recorded actions and checks every observation), the pick is played,
and Swift alone plays on to the step limit. The same continuation for every pick, so a difference in the final
score is the difference that one decision made.

    .venv/bin/python benchmarks/hint_effect.py --out /tmp/hint-effect --minutes 90        # resumable
    .venv/bin/python benchmarks/hint_effect.py --out benchmarks/results/hint-effect-dev --report   # the first run

Writes OUT/decisions.jsonl (one line per Sage call: the three picks and their rollouts) and prints a summary;
`--report` prints the summary of what is there.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.amm.episodic import SAGE_HEADER, EpisodicMemory, names_only_in_view  # noqa: E402
from agent_core.controller import Agent  # noqa: E402
from agent_core.evaluate.paired import t_interval  # noqa: E402
from agent_core.evaluate.runner import EpisodeRunner  # noqa: E402
from agent_core.evaluate.spec import EvalSpec, Job, trace_path  # noqa: E402
from agent_core.sage import Sage  # noqa: E402
from agent_core.task_catalog import catalog  # noqa: E402
from agent_core.trace import read_episode  # noqa: E402

VARIANTS = ("all", "in_view", "none")
_now: dict = {"job": None, "step": 0, "in_view_block": None}


def in_view_block(mem: EpisodicMemory, r) -> str:
    """The T4 block Sage would get with only the injected records whose action names objects in view."""
    look, inventory = _now.get("look", ""), _now.get("inventory", "")
    by_id = {c.id: c for c in r.result.top} if r.result is not None else {}
    lines = []
    for cid in r.injected_ids:
        m = mem.stream.get(cid) if mem.stream is not None else None
        extra = m.extra if m is not None else {}
        if cid not in by_id or (extra.get("action") and not names_only_in_view(extra, look, inventory)):
            continue
        lines.append(mem._sage_line(by_id[cid], extra))
    return SAGE_HEADER + "\n" + "\n".join(lines) if lines else ""


def install(log: list[dict]) -> None:
    """Wrap T4 (keep the in-view block beside the real one) and Sage.think (ask the other two variants)."""
    t4, think, step = EpisodicMemory.t4, Sage.think, Agent.step

    def t4_wrapped(self, s, room, inventory, history, actions_failed):
        r = t4(self, s, room, inventory, history, actions_failed)
        _now["in_view_block"] = in_view_block(self, r) if r.injected_text else ""
        return r

    def think_wrapped(self, ctx):
        res = think(self, ctx)
        if not ctx.memory or res.error:
            return res
        picks = {"all": res.actions[:1]}
        blocks = {"in_view": _now.get("in_view_block") or "", "none": ""}
        for name, block in blocks.items():
            if block == ctx.memory:
                picks[name] = picks["all"]
                continue
            alt = think(self, dataclasses.replace(ctx, memory=block))
            picks[name] = alt.actions[:1] if not alt.error else None
        log.append({"job": _now["job"], "step": _now["step"], "picks": {k: (v[0] if v else None)
                                                                        for k, v in picks.items()},
                    "records": ctx.memory.count("\n"), "records_in_view": blocks["in_view"].count("\n")})
        return res

    def step_wrapped(self):
        _now["step"] = len(self.records) + 1
        _now["look"], _now["inventory"] = self.last.look, self.last.inventory
        return step(self)

    EpisodicMemory.t4, Sage.think, Agent.step = t4_wrapped, think_wrapped, step_wrapped


def rollout(runner: EpisodeRunner, parent_path: Path, step: int, action: str) -> dict:
    """Fork the parent before `step`, play `action` there, then Swift alone to the step limit."""
    agent = runner.agent("swift")
    parent = read_episode(parent_path)
    agent.fork(parent, step - 1)
    turn = agent._swift_turn

    def forced(w, valid):
        agent._swift_turn = turn
        return action, "swift"

    agent._swift_turn = forced
    s = agent.run()
    first = agent.records[step - 1]
    return {"final": s.final_score, "played": first.action, "reward": first.score - (agent.records[step - 2].score
                                                                                    if step > 1 else 0.0)}


def summarize(rows: list[dict]) -> None:
    n = len(rows)
    print(f"{n} Sage calls with hints, in {len({r['job'] for r in rows})} episodes")
    for alt in ("in_view", "none"):
        differ = [r for r in rows if r["picks"].get(alt) != r["picks"]["all"] and r["picks"].get(alt)]
        judged = [r for r in differ if "final" in r.get("rollouts", {}).get(alt, {})
                  and "final" in r.get("rollouts", {}).get("all", {})]
        d = [r["rollouts"]["all"]["final"] - r["rollouts"][alt]["final"] for r in judged]
        iv = t_interval(d)
        m, lo, hi = iv.mean, iv.low, iv.high
        better = sum(x > 0 for x in d)
        worse = sum(x < 0 for x in d)
        print(f"hints 'all' vs '{alt}': the pick differs in {len(differ)} of {n} calls; judged {len(judged)}: "
              f"final with 'all' minus with '{alt}' = {m:+.2f} [{lo:+.2f}, {hi:+.2f}] "
              f"('all' better in {better}, worse in {worse}, same {len(d) - better - worse}; "
              f"{len(differ) - len(judged)} not judged: the replay parted from the record)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=60.0, help="start no new episode after this long")
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--tasks", nargs="*", default=None, help="default: all 30, the first dev variation of each")
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dec = out / "decisions.jsonl"
    rows = [json.loads(x) for x in dec.read_text().splitlines()] if dec.exists() else []
    if args.report:
        summarize(rows)
        return
    done = set((out / "done.txt").read_text().split()) if (out / "done.txt").exists() else set()
    spec = EvalSpec(presets=["amm", "swift"], split="dev", step_limit=args.max_steps,
                    overrides=["llm.n_threads=2"])
    runner = EpisodeRunner(spec, out)
    log: list[dict] = []
    install(log)
    t0 = time.time()
    for info in catalog().tasks:
        if args.tasks and info.name not in args.tasks:
            continue
        job = Job("amm", info.name, info.dev[0])
        if job.run_id in done:
            continue
        if time.time() - t0 > args.minutes * 60:
            break
        _now["job"] = job.run_id
        log.clear()
        t1 = time.time()
        runner.run(job)
        parent = trace_path(out, job)
        for r in log:
            r["rollouts"] = {}
            if not any(r["picks"].get(a) and r["picks"][a] != r["picks"]["all"] for a in ("in_view", "none")):
                continue
            for name in VARIANTS:
                a = r["picks"].get(name)
                if not a or any(r["rollouts"].get(o, {}).get("action") == a for o in r["rollouts"]):
                    same = next((o for o in r["rollouts"] if r["rollouts"][o].get("action") == a), None)
                    if same:
                        r["rollouts"][name] = r["rollouts"][same]
                    continue
                try:
                    r["rollouts"][name] = {"action": a, **rollout(runner, parent, r["step"], a)}
                except Exception as e:  # noqa: BLE001 - a replay that parts from the record: reported, not judged
                    r["rollouts"][name] = {"action": a, "error": f"{type(e).__name__}: {e}"}
        with dec.open("a") as f:
            for r in log:
                f.write(json.dumps(r) + "\n")
        with (out / "done.txt").open("a") as f:
            f.write(job.run_id + "\n")
        rows += log
        print(f"{job.run_id}: {len(log)} Sage calls with hints, {time.time() - t1:.0f} s", flush=True)
    runner.close()
    summarize(rows)


if __name__ == "__main__":
    main()
