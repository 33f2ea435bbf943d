"""SRM's stagnation detector (docs/AGENT.md §6.2; defaults from the reference code).

Deterministic, after every step, over the last `stagnation_window` steps of the episode. It reads step
records only (`agent_core.trace.StepRecord`), so the same function runs live, on a recorded trace, and in
tests on real episode prefixes. Past a threshold it emits a typed `StagnationReport`: the failure modes,
their counts, the actions to avoid and the constraints for the Critic.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from ..actions import action_key, is_move, verb_of
from ..config import SRMConfig
from ..trace import StagnationReport, StepRecord

MODES: dict[str, str] = {
    "SAME_OBS": "the same observation came back {n} times in the last {w} steps, each time from the same "
                "situation (room, inventory, surroundings) and changing nothing",
    "REPEAT_ACTION_NO_EFFECT": "the same action in the same situation gave the same observation {n} times "
                               "in the last {w} steps (no effect)",
    "REPEAT_VERB_NO_EFFECT": "the same kind of action ('{verb}') {n} times in a row changed nothing "
                             "(room, inventory and surroundings unchanged, answers that say nothing happened, "
                             "no reward)",
    "MOVE_SPAM": "{n} moves in the last {w} steps visited only {k} distinct (room, inventory) states",
    "INVALID_REPEAT": "{n} actions in the last {w} steps were not valid",
}


def mode_code(mode: str, cfg: SRMConfig) -> str:
    """The reference code's names: SAME_OBS_3, REPEAT_ACTION_2_NO_EFFECT, REPEAT_VERB_3_NO_EFFECT,
    MOVE_SPAM_4_OF_5, INVALID_REPEAT_3 (the numbers are this config's)."""
    return {"SAME_OBS": f"SAME_OBS_{cfg.same_observation_threshold}",
            "REPEAT_ACTION_NO_EFFECT": f"REPEAT_ACTION_{cfg.repeat_action_threshold}_NO_EFFECT",
            "REPEAT_VERB_NO_EFFECT": f"REPEAT_VERB_{cfg.repeat_verb_threshold}_NO_EFFECT",
            "MOVE_SPAM": f"MOVE_SPAM_{cfg.move_spam_moves}_OF_{cfg.stagnation_window}",
            "INVALID_REPEAT": f"INVALID_REPEAT_{cfg.repeated_invalid_threshold}"}[mode]


def _obs_sig(text: str) -> str:
    return " ".join((text or "").split())


def _state(r: StepRecord) -> tuple[str, str]:
    return r.room, _obs_sig(r.inventory)


def _monitoring(r: StepRecord, cfg: SRMConfig) -> bool:
    """Watching a running process (a stove or heater on, a reading taken): looking at or measuring the same
    thing again is how an agent waits for water to boil or chocolate to melt, not a loop."""
    if verb_of(r.action) not in cfg.observe_verbs:
        return False
    look = (r.look or "").lower()
    return any(p in look for p in ("turned on", "activated")) or "measures" in (r.observation or "").lower()


def _full_state(r: StepRecord) -> tuple[str, str, str]:
    return r.room, _obs_sig(r.inventory), _obs_sig(r.look)


def detect(records: Sequence[StepRecord], cfg: SRMConfig, last_report_step: int | None = None
           ) -> StagnationReport | None:
    """The report after the last of `records` (the episode so far), or None."""
    if len(records) < max(cfg.stagnation_min_steps, 2):
        return None
    now = records[-1].step
    if last_report_step is not None and now - last_report_step < cfg.stagnation_refire_steps:
        return None
    if cfg.stagnation_restart:
        # the window starts after the last positive reward or report: what came before was progress, or has been
        # reported already (the step before the window stays readable, as the state the window's first step left)
        start = max([r.step for r in records if r.reward > 0] + [last_report_step or 0])
        n_since = sum(1 for r in records if r.step > start)
        if n_since < max(cfg.stagnation_min_steps, 2):
            return None
        records = records[-(n_since + 1):] if n_since < len(records) else records
        w = min(cfg.stagnation_window, n_since)
    else:
        w = cfg.stagnation_window
    return _report(records, cfg, w)


def _report(records: Sequence[StepRecord], cfg: SRMConfig, w: int) -> StagnationReport | None:
    win = list(records[-w:])
    modes: list[str] = []
    counts: dict[str, int] = {}
    words: list[str] = []
    avoid: list[str] = []
    signature = ""

    # Only idle steps count: no reward, not a move or a wait, and the room, inventory and surroundings just
    # as they were before the step. "You move to the hallway." three times is how an agent searches rooms
    # (moves are MOVE_SPAM's business); "The door is already open." in three rooms, or "You move the jug to
    # the sink." between pours, is progress.
    ignore = set(cfg.stagnation_ignore_verbs)
    before = {id(r): p for p, r in zip(records[-w - 1:-1], records[-w:])} if len(records) > w else \
        {id(r): p for p, r in zip(records[:-1], records[1:])}
    idle = [r for r in win if r.reward <= 0 and not is_move(r.action) and verb_of(r.action) not in ignore
            and id(r) in before and _full_state(before[id(r)]) == _full_state(r) and not _monitoring(r, cfg)]
    # A repetition is the same answer from the same situation: the full state before the step (room, inventory,
    # surroundings) is part of the key, so watering pot 3 and then pot 2 are two situations, not a loop.
    def situation(r: StepRecord) -> tuple:
        return _full_state(before[id(r)])

    # SAME_OBS: one observation this often in the window, from the same situation
    obs = Counter((_obs_sig(r.observation), situation(r)) for r in idle)
    (top_obs, n_obs) = obs.most_common(1)[0] if obs else (("", ()), 0)
    if n_obs >= cfg.same_observation_threshold:
        modes.append("SAME_OBS")
        counts["SAME_OBS"] = n_obs
        signature = top_obs[0]
        words.append(MODES["SAME_OBS"].format(n=n_obs, w=len(win)))
        avoid += [r.action for r in idle if (_obs_sig(r.observation), situation(r)) == top_obs]
    # REPEAT_ACTION_NO_EFFECT: the same action in the same situation gave the same observation this often
    pairs = Counter((action_key(r.action), _obs_sig(r.observation), situation(r)) for r in idle)
    (pair, n_pair) = pairs.most_common(1)[0] if pairs else (("", "", ()), 0)
    if n_pair >= cfg.repeat_action_threshold:
        modes.append("REPEAT_ACTION_NO_EFFECT")
        counts["REPEAT_ACTION_NO_EFFECT"] = n_pair
        signature = signature or pair[1]
        words.append(MODES["REPEAT_ACTION_NO_EFFECT"].format(n=n_pair, w=len(win)))
        avoid += [r.action for r in idle if action_key(r.action) == pair[0]]
    # REPEAT_VERB_NO_EFFECT: the last k actions share a verb and nothing changed
    k = cfg.repeat_verb_threshold
    if len(records) >= k + 1:
        tail = list(records[-k:])
        start = records[-k - 1]
        verbs = {verb_of(r.action) for r in tail}
        unchanged = all(_full_state(r) == _full_state(start) for r in tail)
        # "The drawer is now open" three times for three drawers is progress; three identical answers, or
        # three that say nothing happened, are not
        no_news = len({_obs_sig(r.observation) for r in tail}) == 1 or all(
            any(p.lower() in r.observation.lower() for p in cfg.no_effect_phrases) for r in tail)
        if (len(verbs) == 1 and "" not in verbs and not verbs & ignore and unchanged and no_news
                and all(r.reward <= 0 for r in tail)):
            verb = verbs.pop()
            modes.append("REPEAT_VERB_NO_EFFECT")
            counts["REPEAT_VERB_NO_EFFECT"] = k
            words.append(MODES["REPEAT_VERB_NO_EFFECT"].format(n=k, verb=verb))
            avoid += [r.action for r in tail]
    # MOVE_SPAM: many moves, few distinct states
    moves = [r for r in win if is_move(r.action)]
    states = {_state(r) for r in win}
    if (len(win) >= w and len(moves) >= cfg.move_spam_moves and len(states) <= cfg.move_spam_max_states
            and all(r.reward <= 0 for r in win)):
        modes.append("MOVE_SPAM")
        counts["MOVE_SPAM"] = len(moves)
        words.append(MODES["MOVE_SPAM"].format(n=len(moves), w=len(win), k=len(states)))
        avoid += [r.action for r in moves]
    # INVALID_REPEAT: invalid actions pile up
    invalid = [r for r in win if r.action_valid is False]
    if len(invalid) >= cfg.repeated_invalid_threshold:
        modes.append("INVALID_REPEAT")
        counts["INVALID_REPEAT"] = len(invalid)
        words.append(MODES["INVALID_REPEAT"].format(n=len(invalid), w=len(win)))
        avoid += [r.action for r in invalid]
    if not modes:
        return None
    seen: dict[str, str] = {}
    never = set(cfg.never_avoid_verbs)  # looking again is how an agent checks: never on the list
    for a in avoid + [r.action for r in records[-cfg.critic_repeat_window:]]:
        if verb_of(a) not in never:
            seen.setdefault(action_key(a), a)
    constraints = ["no 'focus on' now: a wrong focus ends the task, and a stuck agent is not sure"]
    if "MOVE_SPAM" in modes:
        constraints.append(f"at most {cfg.critic_max_moves} move (go to / teleport to): moving has not helped")
    constraints.append("do not repeat: " + ", ".join(f"'{a}'" for a in seen.values()))
    return StagnationReport(modes=[mode_code(m, cfg) for m in modes],
                            counts={mode_code(m, cfg): c for m, c in counts.items()}, window=len(win),
                            last_action=records[-1].action, observation_signature=signature[:200],
                            actions_to_avoid=list(seen.values()), constraints=constraints, explanation=words)
