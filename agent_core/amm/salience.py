"""The salience gate (docs/AGENT.md §5.1; the rules are the reference code's tagging): which steps become episodic
memories, with which tag and importance, and the compact record text that is stored.

The rules are named here; their precedence and tags come from `amm.tag_rules` ("rule:tag" pairs), their
thresholds from the other `amm.*` fields. The first rule that holds decides; none holds -> nothing is written.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..actions import canonical, is_focus, verb_of
from ..config import AMMConfig
from ..swift.format import clean, fmt_num, fmt_reward


@dataclass
class StepFacts:
    """What the write hook sees of one environment step."""

    task: str  # task name, e.g. "boil"
    task_description: str
    variation: int
    room: str  # the room the action was taken in
    inventory: str  # before the action
    action: str
    observation: str  # the game's reply
    reward: float
    score_before: float
    score_after: float
    done: bool
    history: list[tuple[str, str]] = field(default_factory=list)  # (action, observation) before this step


def _is_invalid_feedback(f: StepFacts, c: AMMConfig) -> bool:
    text = f.observation.strip().lower()
    return any(text.startswith(p.lower()) or p.lower() in text[:120] for p in c.invalid_phrases)


# name -> (test, words with the thresholds filled in)
RULES: dict[str, tuple[Callable[[StepFacts, AMMConfig], bool], Callable[[StepFacts, AMMConfig], str]]] = {
    "ended_100": (lambda f, c: f.done and f.score_after >= 100,
                  lambda f, c: "the episode ended with the task completed (score 100)"),
    "ended_other": (lambda f, c: f.done and f.score_after < 100,
                    lambda f, c: f"the episode ended without completing the task (score {fmt_num(f.score_after)})"),
    "invalid_feedback": (_is_invalid_feedback,
                         lambda f, c: "the game rejected the action (explicit invalid-action feedback)"),
    "focus_reward": (lambda f, c: f.reward > 0 and is_focus(f.action),
                     lambda f, c: f"'focus on' earned {fmt_reward(f.reward)}: the right object"),
    "big_reward": (lambda f, c: f.reward >= c.success_min_reward,
                   lambda f, c: f"reward {fmt_reward(f.reward)} >= {fmt_num(c.success_min_reward)}"),
    "wait_reward": (lambda f, c: f.reward > c.near_miss_min_reward and verb_of(f.action) in ("wait", "wait1"),
                    lambda f, c: f"waiting earned {fmt_reward(f.reward)}: a process moved on"),
    "small_reward": (lambda f, c: c.near_miss_min_reward < f.reward < c.success_min_reward,
                     lambda f, c: f"reward {fmt_reward(f.reward)} (progress below {fmt_num(c.success_min_reward)})"),
}
TAGS: tuple[str, ...] = ("success", "near-miss", "avoidance")


def parse_rules(c: AMMConfig) -> list[tuple[str, str]]:
    """`amm.tag_rules` as (rule, tag) pairs; a clear error for a rule or tag that does not exist."""
    out = []
    for item in c.tag_rules:
        rule, _, tag = str(item).partition(":")
        rule, tag = rule.strip(), tag.strip()
        if rule not in RULES:
            raise ValueError(f"amm.tag_rules: unknown rule {rule!r}; rules are {', '.join(RULES)}")
        if tag not in TAGS:
            raise ValueError(f"amm.tag_rules: unknown tag {tag!r} for {rule!r}; tags are {', '.join(TAGS)}")
        out.append((rule, tag))
    return out


@dataclass
class Salience:
    rule: str
    tag: str
    why: str


def salience(f: StepFacts, c: AMMConfig) -> Salience | None:
    """The first rule (in `amm.tag_rules` order) that holds for this step, or None: not worth storing."""
    for rule, tag in parse_rules(c):
        test, words = RULES[rule]
        if test(f, c):
            return Salience(rule, tag, words(f, c))
    return None


def importance(s: Salience, f: StepFacts, c: AMMConfig) -> float:
    """Importance (1..10) from the tag and the reward: no LLM call per step on a CPU."""
    if s.rule == "ended_100":
        base = c.importance_terminal_success
    elif s.rule == "ended_other":
        base = c.importance_terminal_failure
    else:
        base = {"success": c.importance_success, "near-miss": c.importance_near_miss,
                "avoidance": c.importance_avoidance}[s.tag]
    if f.reward > 0 and c.success_min_reward > 0:
        base += c.importance_reward_bonus * min(1.0, f.reward / c.success_min_reward)
    return float(min(10.0, max(1.0, base)))


def record_text(f: StepFacts, tag: str, c: AMMConfig) -> str:
    """The compact semi-structured record that is embedded and retrieved (one line)."""
    recent = " ; ".join(f"{clean(a, 40)} -> {clean(o, c.record_history_obs_chars)}"
                        for a, o in f.history[-c.record_history:]) or "(start of the episode)"
    return (f"TASK: {clean(f.task_description, 160)} | ROOM: {f.room or '?'} | "
            f"INVENTORY: {clean(f.inventory, c.record_inventory_chars)} | ACTION: {canonical(f.action)} | "
            f"RESULT: {clean(f.observation, c.record_obs_chars)} | RECENT: {recent} | "
            f"REWARD: {fmt_reward(f.reward)} ({fmt_num(f.score_before)} -> {fmt_num(f.score_after)}) | TAG: {tag}")


def content_key(tag: str, action: str, result: str, room: str) -> str:
    """Two records with this key say the same thing: within an episode only the first is written (the
    reference store dedupes by content hash; the record text itself differs in its recent-context part)."""
    from ..actions import action_key

    return f"{tag}|{action_key(action)}|{' '.join(clean(result, 200).lower().split())}|{room}"


def record_extra(f: StepFacts, s: Salience, step: int, run_id: str) -> dict:
    """Metadata stored beside the text (scalars only): what the explorer filters and the injections print."""
    return {"variation": int(f.variation), "step": int(step), "run_id": run_id, "rule": s.rule,
            "action": canonical(f.action), "result": clean(f.observation, 200), "room": f.room,
            "reward": float(f.reward), "score_before": float(f.score_before), "score_after": float(f.score_after)}
