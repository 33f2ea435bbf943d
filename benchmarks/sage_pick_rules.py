"""Sage's pick rules side by side on recorded Sage calls, by decision value (train/dev episodes only: this is where
the default is designed). Every rule is recomputed from what the call recorded (each option's score as Sage's
reply, Swift's ranking of the valid actions); its pick at each call is rolled out against Swift's own choice there,
both with Swift alone playing on (agent_core.rollout). A rule that picks Swift's action has value 0 there.

    .venv/bin/python benchmarks/sage_pick_rules.py evals/dev-fresh-llm evals/dev-baseline-30x2 --workers 2 \
        --out benchmarks/results/sage_pick_rules_dev.json

Rules: mean (the pick by mean log-probability per token, today's `sage.pick_rule = mean`); margin-M (Sage's pick
only when its mean beats the runner-up by M, else Swift's); calibrated (the mean less what the option's verb and
length predict, fitted on these same lists); borda (the best sum of Sage's and Swift's ranks); agree-K (Sage's pick
only when Swift ranks it among its first K valid actions, else Swift's).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_core.actions import action_key, verb_of  # noqa: E402
from agent_core.evaluate.paired import t_interval  # noqa: E402
from agent_core.rollout import DEFAULT_HORIZON, ROLLOUTS_DIR, RolloutRequest, run_rollouts  # noqa: E402
from agent_core.trace import read_episode  # noqa: E402
from agent_core.trace.io import list_traces  # noqa: E402


def calls(dirs: list[Path]) -> list[dict]:
    """Every recorded Sage pick by score (a grounding call whose pick was played), on train or dev episodes."""
    out = []
    for d in dirs:
        for path in list_traces(d):
            ep = read_episode(path)
            if ep.summary is None:
                continue
            if ep.header.split not in ("train", "dev"):
                raise SystemExit(f"{path} is a {ep.header.split} episode: pick rules are designed on train/dev only")
            for rec in ep.steps:
                scored = next((x for x in rec.decisions if x.kind == "option_scores" and x.purpose == "ground"), None)
                pick = next((x for x in rec.decisions if x.kind == "sage_pick"), None)
                if scored is None or pick is None or rec.system != "sage" or rec.replayed:
                    continue
                if action_key(pick.action) != action_key(rec.action) or not scored.options:
                    continue
                out.append({"trace": str(path.relative_to(ROOT)) if path.is_absolute() and path.is_relative_to(ROOT)
                            else str(path), "step": rec.step, "task": ep.header.task,
                            "trigger": rec.trigger.name if rec.trigger else "", "options": list(scored.options),
                            "scores": list(scored.scores), "swift": [c.action for c in rec.swift_valid_ranked],
                            "played": rec.action})
    return out


def _words(a: str) -> int:
    return len(a.split())


def fit_prior(cs: list[dict]) -> tuple[dict[str, float], float, float]:
    """score ~ verb + length (words): least squares over every option of every list."""
    verbs = sorted({verb_of(o) or o.split()[0] for c in cs for o in c["options"]})
    rows, ys = [], []
    for c in cs:
        for o, s in zip(c["options"], c["scores"]):
            v = verb_of(o) or o.split()[0]
            rows.append([1.0 if v == w else 0.0 for w in verbs] + [_words(o)])
            ys.append(s)
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)
    return {w: float(coef[i]) for i, w in enumerate(verbs)}, float(coef[-1]), 0.0


def rules(prior) -> dict:
    verb_w, len_w, _ = prior

    def swift_best(c):
        return c["swift"][0] if c["swift"] else c["options"][0]

    def mean(c):
        return c["options"][0]

    def margin(m):
        def rule(c):
            if len(c["scores"]) < 2 or c["scores"][0] - c["scores"][1] >= m:
                return c["options"][0]
            return swift_best(c)
        return rule

    def calibrated(c):
        adj = [s - verb_w.get(verb_of(o) or o.split()[0], 0.0) - len_w * _words(o)
               for o, s in zip(c["options"], c["scores"])]
        return c["options"][int(np.argmax(adj))]

    def borda(c):
        sw = {action_key(a): i for i, a in enumerate(c["swift"])}
        rank = [(i + sw.get(action_key(o), len(c["options"])), i) for i, o in enumerate(c["options"])]
        return c["options"][min(range(len(rank)), key=lambda j: rank[j])]

    def agree(k):
        def rule(c):
            top = {action_key(a) for a in c["swift"][:k]}
            return c["options"][0] if action_key(c["options"][0]) in top else swift_best(c)
        return rule

    return {"mean": mean, "margin-0.1": margin(0.1), "margin-0.2": margin(0.2), "margin-0.3": margin(0.3),
            "calibrated": calibrated, "borda": borda, "agree-3": agree(3), "agree-5": agree(5)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--horizon", type=int, default=DEFAULT_HORIZON)
    ap.add_argument("--rollouts", default=str(ROLLOUTS_DIR))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    cs = calls(args.dirs)
    prior = fit_prior(cs)
    rs = rules(prior)
    picks = {name: [rule(c) for c in cs] for name, rule in rs.items()}
    reqs, index = [], {}

    def req(c, action):
        key = (c["trace"], c["step"], action_key(action) if action else None)
        if key not in index:
            index[key] = len(reqs)
            reqs.append(RolloutRequest(c["trace"], c["step"] - 1, action, "swift", args.horizon))
        return index[key]

    base = [req(c, None) for c in cs]
    mine = {name: [req(c, a) for c, a in zip(cs, ps)] for name, ps in picks.items()}
    print(f"{len(cs)} Sage calls in {len(args.dirs)} folder(s); {len(reqs)} distinct rollouts", flush=True)
    outs = run_rollouts(reqs, workers=args.workers, out=args.rollouts,
                        on_done=lambda n, t, o: print(f"  {n}/{t}", flush=True) if n % 25 == 0 or n == t else None)
    table = {}
    for name, idx in mine.items():
        vals, by_trigger, same = [], defaultdict(list), 0
        for c, i, b in zip(cs, idx, base):
            a, w = outs[i].rollout, outs[b].rollout
            if a is None or w is None:
                continue
            v = 0.0 if action_key(a.first_action) == action_key(w.first_action) else max(0.0, a.final) - max(0.0, w.final)
            same += action_key(a.first_action) == action_key(w.first_action)
            vals.append(v)
            by_trigger[c["trigger"]].append(v)
        iv = t_interval(vals)
        moves = Counter(verb_of(p) == "move" for p in picks[name])
        table[name] = {"n": iv.n, "mean": iv.mean, "low": iv.low, "high": iv.high, "wins": sum(v > 0 for v in vals),
                       "losses": sum(v < 0 for v in vals), "swift_action": same,
                       "move_share": round(moves[True] / len(cs), 3) if cs else 0.0,
                       "by_trigger": {k: {"n": len(x), "mean": round(float(np.mean(x)), 3)} for k, x in
                                      sorted(by_trigger.items())}}
        print(f"{name:>11}: n {iv.n}, mean {iv.mean:+.2f} [{iv.low:+.2f}, {iv.high:+.2f}], won {table[name]['wins']} "
              f"/ lost {table[name]['losses']}, Swift's action at {same}, move {100 * table[name]['move_share']:.0f}%; "
              + ", ".join(f"{k} {x['mean']:+.1f} (n {x['n']})" for k, x in table[name]["by_trigger"].items()))
    if args.out:
        args.out.write_text(json.dumps({"dirs": [str(d) for d in args.dirs], "calls": len(cs), "horizon": args.horizon,
                                        "prior": {"verbs": prior[0], "per_word": prior[1]}, "rules": table},
                                       indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
