"""Decision values: what each mechanism's decision changed, against the road not taken.

For every step where a mechanism changed the action, two rollouts (agent_core.rollout) branch from the state
before it under the same continuation policy (Swift alone by default) and horizon: one plays the action the
mechanism chose, the other the action it replaced. The decision's value is the first branch's score at the end
less the second's (a lost game counts 0, as in Final). The pairs are:

| mechanism    | played                      | instead                                                         |
|--------------|-----------------------------|-----------------------------------------------------------------|
| sage_pick    | Sage's pick                 | what the continuation policy plays there (Swift alone: Swift's) |
| focus_review | the focus review's action   | the focus Swift proposed (the critical trigger's evidence)      |
| gate1_drop   | what was played             | the action Gate-1 dropped (through the same last safeguard)     |
| critic       | the Critic's first action   | what the continuation policy plays there                        |
| t1_retry     | T1's retry with memory      | Swift's guess it replaced                                       |

A decision whose two branches start with the same action changed nothing and is counted apart (`same`). A
T4-hinted plan's pick against the unhinted pick would need the LLM again, so it is not measured here.
"""
from __future__ import annotations

import json
import math
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..actions import action_key
from ..decisions import FocusReview, SagePick, T1Retry
from ..rollout import DEFAULT_HORIZON, ROLLOUTS_DIR, Outcome, RolloutRequest, run_rollouts
from ..trace import Episode, read_episode
from .metrics import shown_position
from .paired import t_interval

MECHANISMS = ("sage_pick", "focus_review", "gate1_drop", "critic", "t1_retry")
LABELS = {"sage_pick": "Sage's pick", "focus_review": "Sage's focus review", "gate1_drop": "Gate-1's drop",
          "critic": "the Critic's action", "t1_retry": "AMM's T1 retry"}
INSTEAD_LABELS = {"sage_pick": "Swift's action", "focus_review": "Swift's focus", "gate1_drop": "the dropped action",
                  "critic": "Swift's action", "t1_retry": "Swift's original guess"}
FILE = "decision_values.json"


@dataclass
class DecisionPoint:
    mechanism: str
    trace: str
    preset: str
    task: str
    variation: int
    step: int  # the recorded step whose action the mechanism decided (the branches start after step - 1)
    played: str
    instead: str | None  # None: the continuation policy's own choice
    detail: str = ""

    def requests(self, policy: str = "swift", horizon: int = DEFAULT_HORIZON) -> tuple[RolloutRequest, RolloutRequest]:
        return (RolloutRequest(self.trace, self.step - 1, self.played, policy, horizon, LABELS[self.mechanism]),
                RolloutRequest(self.trace, self.step - 1, self.instead, policy, horizon,
                               INSTEAD_LABELS[self.mechanism]))


def decision_points(ep: Episode, preset: str = "", mechanisms: Sequence[str] = MECHANISMS) -> list[DecisionPoint]:
    """Every step of `ep` where one of `mechanisms` changed the action, in step order."""
    h = ep.header
    preset = preset or (h.config or {}).get("preset", "")
    out: list[DecisionPoint] = []

    def add(mech: str, rec, instead: str | None, detail: str = "") -> None:
        if mech in mechanisms and (instead is None or action_key(instead) != action_key(rec.action)):
            out.append(DecisionPoint(mech, str(ep.path), preset, h.task, h.variation, rec.step, rec.action, instead,
                                     detail))

    prev = None
    for rec in ep.steps:
        after_menu = prev is not None and bool(prev.menu_options)
        prev = rec
        if rec.replayed or rec.menu is not None or after_menu:  # a menu answer is the game's question, not a choice
            continue
        kinds = {type(d): d for d in rec.decisions}
        review = kinds.get(FocusReview)
        pick = kinds.get(SagePick)
        if review is not None:
            ev = rec.trigger.evidence if rec.trigger is not None else {}
            add("focus_review", rec, ev.get("swift_action") or None, review.picked or "none yet")
        elif pick is not None and rec.system == "sage" and action_key(pick.action) == action_key(rec.action):
            add("sage_pick", rec, None, f"option {shown_position(rec, pick)} of {pick.of} as the model read them"
                if pick.option else "its own command")
        if rec.system == "critic" and rec.critic is not None and rec.critic.status == "called":
            add("critic", rec, None, rec.critic.diagnosis[:160])
        t1 = kinds.get(T1Retry)
        if (t1 is not None and t1.valid and t1.replaced and not t1.outside_top_k
                and action_key(t1.retry) == action_key(rec.action)):
            add("t1_retry", rec, t1.replaced)
        seen: set[str] = set()
        for g in rec.gate1:
            if g.decision == "DROP" and action_key(g.proposed) not in seen:
                seen.add(action_key(g.proposed))
                add("gate1_drop", rec, g.proposed, g.reason)
    return out


@dataclass
class DecisionValue:
    point: DecisionPoint
    with_first: str = ""  # what each branch's first step played (after the last safeguard)
    without_first: str = ""
    with_final: float = 0.0
    without_final: float = 0.0
    value: float | None = None  # None: the branches start alike (the decision changed nothing), or one failed
    end_step: int = 0
    error: str = ""
    with_path: str = ""
    without_path: str = ""

    @property
    def same(self) -> bool:
        return not self.error and action_key(self.with_first) == action_key(self.without_first)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self.point), "with_first": self.with_first, "without_first": self.without_first,
                "with_final": self.with_final, "without_final": self.without_final, "value": self.value,
                "end_step": self.end_step, "error": self.error, "with_path": self.with_path,
                "without_path": self.without_path}


def value_of(point: DecisionPoint, with_: Outcome, without: Outcome) -> DecisionValue:
    dv = DecisionValue(point)
    if with_.rollout is None or without.rollout is None:
        dv.error = with_.error or without.error or "no rollout"
        return dv
    a, b = with_.rollout, without.rollout
    dv.with_first, dv.without_first = a.first_action, b.first_action
    dv.with_final, dv.without_final = a.final, b.final
    dv.end_step, dv.with_path, dv.without_path = max(a.end_step, b.end_step), a.path, b.path
    if not dv.same:
        dv.value = a.value - b.value
    return dv


def measure(points: Sequence[DecisionPoint], policy: str = "swift", horizon: int = DEFAULT_HORIZON,
            workers: int = 1, out: str | Path = ROLLOUTS_DIR,
            on_done: Callable[[int, int], None] | None = None,
            cancel: threading.Event | None = None) -> list[DecisionValue]:
    """Every point's value: its two rollouts (shared with any other point that asks for the same one)."""
    reqs: list[RolloutRequest] = []
    index: dict[RolloutRequest, int] = {}
    pairs: list[tuple[int, int]] = []
    for p in points:
        ij = []
        for r in p.requests(policy, horizon):
            key = RolloutRequest(r.trace, r.step, r.action, r.policy, r.horizon)  # the label is not part of it
            if key not in index:
                index[key] = len(reqs)
                reqs.append(r)
            ij.append(index[key])
        pairs.append((ij[0], ij[1]))
    outcomes = run_rollouts(reqs, workers=workers, out=out, cancel=cancel,
                            on_done=(lambda n, total, o: on_done(n, total)) if on_done else None)
    return [value_of(p, outcomes[i], outcomes[j]) for p, (i, j) in zip(points, pairs)]


def _stats(values: Sequence[float]) -> dict[str, Any]:
    iv = t_interval(list(values))
    finite = lambda x: x if math.isfinite(x) else None  # noqa: E731 - JSON has no infinity
    return {"n": iv.n, "mean": iv.mean, "sd": iv.sd, "low": finite(iv.low), "high": finite(iv.high),
            "wins": sum(v > 0 for v in values), "losses": sum(v < 0 for v in values),
            "ties": sum(v == 0 for v in values)}


def summarize(values: Sequence[DecisionValue], groups: dict[str, str] | None = None) -> dict[str, Any]:
    """Per mechanism (and per preset and task group within it): count, mean with its 95% t-interval, wins,
    losses and ties, over the decisions that changed the action; `same` and `errors` counted apart."""
    groups = groups or {}
    out: dict[str, Any] = {}
    for mech in MECHANISMS:
        mine = [v for v in values if v.point.mechanism == mech]
        if not mine:
            continue
        scored = [v for v in mine if v.value is not None]
        row = {"label": LABELS[mech], "instead": INSTEAD_LABELS[mech], **_stats([v.value for v in scored]),
               "decisions": len(mine), "same": sum(v.same for v in mine), "errors": sum(bool(v.error) for v in mine)}
        by_preset: dict[str, list[float]] = {}
        by_group: dict[str, list[float]] = {}
        for v in scored:
            by_preset.setdefault(v.point.preset, []).append(v.value)
            by_group.setdefault(groups.get(v.point.task, "Medium"), []).append(v.value)
        row["by_preset"] = {k: _stats(x) for k, x in sorted(by_preset.items())}
        row["by_group"] = {k: _stats(by_group[k]) for k in ("Short", "Medium", "Long") if k in by_group}
        out[mech] = row
    return out


POLICY_WORDS = {"swift": "Swift alone", "own": "the episode's own preset"}


def evaluation_points(eval_dir: Path, presets: Iterable[str] | None = None,
                      mechanisms: Sequence[str] = MECHANISMS) -> list[DecisionPoint]:
    """The decision points of an evaluation's finished traces (`eval_dir/traces/<preset>/*.jsonl`)."""
    points: list[DecisionPoint] = []
    want = set(presets) if presets else None
    for d in sorted((eval_dir / "traces").iterdir()):
        if not d.is_dir() or (want is not None and d.name not in want):
            continue
        for path in sorted(d.glob("*.jsonl")):
            ep = read_episode(path)
            if ep.summary is None:
                continue
            points += decision_points(ep, d.name, mechanisms)
    return points


def task_groups() -> dict[str, str]:
    from ..config_sections import EvalConfig
    from ..task_catalog import catalog
    from .metrics import group_of

    return {t.name: group_of(t.gold_length, EvalConfig()) for t in catalog().tasks}


def write(eval_dir: Path, values: Sequence[DecisionValue], settings: dict[str, Any]) -> dict[str, Any]:
    """`eval_dir/decision_values.json`: the settings, the summary and every decision (the report reads it)."""
    data = {"settings": settings, "summary": summarize(values, task_groups()),
            "decisions": [v.to_dict() for v in values]}
    path = eval_dir / FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)
    return data


def load(eval_dir: Path) -> dict[str, Any] | None:
    path = Path(eval_dir) / FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
