"""One or two plain sentences per step, generated deterministically from the step record (no LLM): who acted
and why, what Gate-1 did, which memory was used and which of its three scores made it win, what the Critic
diagnosed, and what changed in the score. The Run page shows them above the panels; a recorded episode's
narration reads as a text track; the exported HTML carries them too. Pure functions, no Streamlit."""
from __future__ import annotations

import re

from agent_core.actions import GENERIC_WORDS, action_key, is_focus, never_a_focus_target, verb_of
from agent_core.config import ControllerConfig
from agent_core.srm.gate1 import REASONS
from agent_core.trace import EpisodeHeader, StepRecord

# why control switched, in a student's words (the trigger's rule with its number is in the panels)
WHY = {
    "invalid": "the game would not accept it",
    "critical": "a wrong 'focus on' ends the task",
    "stuck": "the last {k} steps earned no points",
    "unexpected": "the last observation reported a problem",
    "gate1_drops": "Gate-1 dropped the actions it had",
}
MODE_WORDS = {"SAME_OBS": "the same observation kept coming back", "REPEAT_ACTION": "an action was repeated with "
              "no effect", "REPEAT_VERB": "the same kind of action kept changing nothing", "MOVE_SPAM": "it kept moving "
              "between rooms without getting anywhere", "INVALID_REPEAT": "actions the game does not accept kept "
              "coming"}
SCORE_WORDS = {"recency_n": "recency (it was used or written recently)", "importance_n": "importance",
               "relevance_n": "relevance (it is most like the situation now)"}


def _q(text: str, n: int = 70) -> str:
    """A quoted action or text, cut at a word (never mid-word) when longer than n."""
    text = " ".join(str(text).split())
    if len(text) <= n:
        return f"'{text}'"
    cut = text.rfind(" ", 0, n - 1)
    return f"'{text[: cut if cut > n // 2 else n - 1]}…'"


def _short_reason(code: str) -> str:
    return REASONS.get(code, code).split(":")[0].split(" (")[0]


def _swift_wanted(rec: StepRecord) -> str | None:
    ev = rec.trigger.evidence if rec.trigger else {}
    return ev.get("swift_action") or ev.get("swift_top1") or (rec.swift_valid_ranked[0].action
                                                              if rec.swift_valid_ranked else rec.swift_top1)


def stuck_window(header: EpisodeHeader | None) -> int:
    """The stuck rule's window of the recorded run (its header's config), else today's default."""
    k = ControllerConfig().stuck_window
    if header is not None and isinstance(header.config, dict):
        k = header.config.get("controller", {}).get("stuck_window", k)
    return k


def actor_sentence(rec: StepRecord, header: EpisodeHeader | None = None) -> str:
    """Who chose this step's action, and why that system was the one acting."""
    failed = next((c for c in rec.llm_calls if c.error), None)
    trig = rec.trigger
    if rec.menu is not None:
        m = rec.menu
        if m.chosen < 0:
            return (f"The game asked which object {_q(m.request)} meant; the agent cancelled the question rather "
                    f"than guess ({m.why}).")
        opt = m.options[m.chosen] if 0 <= m.chosen < len(m.options) else str(m.chosen)
        who = "Gate-1" if m.chooser == "gate1" else "the agent"
        return f"The game asked which object {_q(m.request)} meant; {who} answered {m.chosen} ({_q(opt, 50)}): {m.why}."
    if trig is not None and trig.name in WHY:
        why = WHY[trig.name].format(k=stuck_window(header))
        wanted = _swift_wanted(rec)
        ask = "so Sage was asked to check which object to focus on" if trig.name == "critical" else "so Sage was asked"
        lead = f"Swift wanted to {_q(wanted)}; {why}, {ask}" if wanted else f"{why.capitalize()}, {ask}"
        if failed is not None:
            how = {"cancelled": "was stopped by Pause", "timeout": "timed out"}.get(failed.failure() or "", "failed")
            return f"{lead}, but its model call {how} ({failed.error[:90]}), so Swift's {_q(rec.action)} was taken."
        if rec.system == "sage":
            picked = "it picked" if any(c.purpose in ("ground", "focus_review") for c in rec.llm_calls) else "it chose"
            return f"{lead}: {picked} {_q(rec.action)}."
        if rec.system == "swift" and any(d.kind == "sage_fallback" and d.reason == "deferred" for d in rec.decisions):
            return (f"{lead}; Sage's own pick was not clear enough to overrule Swift, so Swift's {_q(rec.action)} "
                    f"was taken.")
        if rec.system == "swift":
            return f"{lead}; Sage gave nothing better, so Swift's {_q(rec.action)} was taken."
        return f"{lead}; the action was {_q(rec.action)}."
    if rec.system == "sage":
        return f"Sage's plan went on: {_q(rec.action)} was the next action in its buffer."
    if rec.system == "critic":
        return f"The Critic's suggestion {_q(rec.action)} was taken from the action buffer."
    if rec.system == "user":
        return f"You typed {_q(rec.action)}."
    if rec.system == "branch":
        return f"This branch plays {_q(rec.action)} here, the road the recorded episode did not take."
    if trig is not None and trig.name == "swift_forced":
        n = trig.evidence.get("sage_calls_in_a_row", ControllerConfig().sage_streak_limit)
        return (f"Sage had been asked {n} times in a row, so this time Swift acted on its own "
                f"(otherwise Sage would have been asked again): it chose {_q(rec.action)}.")
    back = ""
    if trig is not None and trig.name in ("buffer_empty", "buffer_failed"):
        back = ("Sage's buffer was empty, so Swift took over again: " if trig.name == "buffer_empty" else
                "Sage's buffered actions kept failing, so Swift took over again: ")
    sure = ""
    if rec.action.startswith("focus on") and rec.swift_valid_ranked:
        sure = " (a 'focus on' it was sure of, so nobody had to check it)"
    if back:
        return f"{back}it chose {_q(rec.action)}{sure}."
    return f"Swift chose {_q(rec.action)}, its most likely valid action{sure}."


def gate1_sentence(rec: StepRecord) -> str | None:
    drops = [g for g in rec.gate1 if g.decision == "DROP"]
    repairs = [g for g in rec.gate1 if g.decision == "REPAIR"]
    parts = []
    if drops:
        d = drops[0]
        more = f" and {len(drops) - 1} more" if len(drops) > 1 else ""
        parts.append(f"Gate-1 stopped {_q(d.proposed, 50)}{more} before it ran ({_short_reason(d.reason).split(',')[0]})")
    if repairs:
        r = repairs[0]
        parts.append(f"Gate-1 repaired {_q(r.proposed, 40)} into {_q(r.result or '', 40)} ({_short_reason(r.reason)})")
    return "; ".join(parts) + "." if parts else None


def _recorded_action(description: str) -> str:
    """The ACTION field of an AMM record ('TASK: ... | ACTION: pick up pot | RESULT: ...'), else the text."""
    for part in description.split(" | "):
        if part.startswith("ACTION:"):
            return part[len("ACTION:"):].strip()
    return description


INTO = {"swift": "Swift's retry", "sage": "Sage's prompt", "critic": "the Critic's prompt"}


def memory_use(x) -> tuple[str, object | None, str | None]:
    """Where a retrieval's records went ("Swift's retry"), the injected record that ranked first (None when the
    record does not hold it) and which of its three scores won it (None then too)."""
    into = INTO.get(x.injected_into, x.injected_into)
    top = None
    if x.result is not None and x.injected_ids:
        top = next((c for c in x.result.candidates if c.id == x.injected_ids[0]), None)
    if top is None:
        return into, None, None
    w = x.result.weights or {}
    best = max(SCORE_WORDS, key=lambda k: getattr(top, k) * w.get(k[:-2], 1.0))
    return into, top, SCORE_WORDS[best]


def memory_sentence(rec: StepRecord) -> str | None:
    """The memory that was used (the first injection) and which of its three scores made it win; else a write."""
    for x in rec.retrievals:
        if x.error:
            return f"A memory lookup ({x.trigger}) failed, so the prompt stayed as it was."
        if not x.injected_into or not x.injected_ids or x.result is None:
            continue
        into, top, best = memory_use(x)
        if top is None:
            continue
        return (f"Memory ({x.trigger}) gave {into} {len(x.injected_ids)} record(s); the top one, a {top.tag or top.type} "
                f"about {_q(_recorded_action(top.description), 50)}, won mostly on {best}.")
    written = [w for w in rec.memories_written if w.id and not w.error and not w.duplicate_of]
    if written:
        w = written[0]
        return f"This step was stored as a {w.tag} memory ({w.why.split(';')[0].split(' (')[0]})."
    return None


def srm_sentence(rec: StepRecord) -> str | None:
    parts = []
    if rec.stagnation is not None:
        modes = [next((v for k, v in MODE_WORDS.items() if m.startswith(k)), m) for m in rec.stagnation.modes]
        parts.append(f"The stagnation detector noticed that {modes[0]}" + (f" (and {len(modes) - 1} more signs)"
                                                                           if len(modes) > 1 else ""))
    c = rec.critic
    if c is not None:
        if c.status == "called":
            diag = f" diagnosed {_q(c.diagnosis, 90)} and" if c.diagnosis else ""
            parts.append(f"The Critic{diag} put {len(c.admitted)} action(s) into the buffer "
                         f"(call {c.budget_used} of {c.budget})")
        elif c.status == "failed":
            parts.append(f"The Critic was called but its model call failed ({(c.error or '')[:80]})")
        else:
            parts.append(f"A Critic call was due but skipped: {c.reason or c.status}")
    return ". ".join(parts) + "." if parts else None


def score_sentence(rec: StepRecord) -> str:
    if rec.score >= 100:
        return f"Task complete: the score reached {rec.score:g}."
    if rec.failed or rec.score < 0:
        return f"The task failed here: the score fell to {rec.score:g}."
    if rec.reward > 0:
        return f"It earned {rec.reward:+g} points (now {rec.score:g})."
    if rec.reward < 0:
        return f"It lost {-rec.reward:g} points (now {rec.score:g})."
    if rec.action_valid is False:
        return f"The game did not accept it; the score stays at {rec.score:g}."
    return f"No points this step (score {rec.score:g})."


def task_focus_sentence(rec: StepRecord) -> str | None:
    """Swift's guess was a focus; the objects the task does not name (and the rooms, doors, inventory and air,
    which no task focuses on) were kept out of its choice."""
    if not rec.swift_focus_unnamed:
        return None
    guess = rec.swift_top1 or ""
    keys = {action_key(a) for a in rec.swift_focus_unnamed}
    if guess and action_key(guess) in keys:
        why = ("no task focuses on a room, a door, the inventory or the air" if never_a_focus_target(guess)
               else "the task does not name that object")
        return (f"Swift's first guess was to {_q(guess, 50)}, but {why}, so it was not an option (a wrong focus "
                f"ends the task).")
    return (f"Swift considered a 'focus on'; {len(keys)} object(s) in view that are not targets of this task "
            f"were not options.")


def sage_task_focus_sentence(rec: StepRecord) -> str | None:
    """Sage acted (or tried to) with focus targets left out of its options because the task does not name them."""
    if not rec.sage_focus_unnamed:
        return None
    if rec.sage_focus_refused:
        return ("Sage chose a 'focus on' an object that is not a target of this task, so it was not played "
                "(a wrong focus ends the task).")
    if rec.system != "sage" or not is_focus(rec.action):
        return None  # the list was shorter, but it did not decide this step: the memory sentence may say more
    n = len(rec.sage_focus_unnamed)
    return (f"Sage chose among the focus targets left for this task: {n} other{'s' if n != 1 else ''} in view "
            f"{'were' if n != 1 else 'was'} not in its list.")


def _words(text: str) -> list[str]:
    out = []
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if len(w) >= 3 and w not in GENERIC_WORDS and w not in out:
            out.append(w)
    return out


def plan_pick_sentence(rec: StepRecord) -> str | None:
    """Sage's plan named one object and its pick played another of the same kind ("the plan named aluminum; the
    pick played platinum"): said, so a student does not take the plan for what happened. Read from the plan and
    the scored options only: another option with the same verb differs from the played action exactly in words the
    plan uses, while the played action's own differing words are not in the plan."""
    if rec.system != "sage" or not rec.plan:
        return None
    scored = next((d for d in rec.decisions if d.kind == "option_scores" and getattr(d, "purpose", "") == "ground"),
                  None)
    if scored is None:
        return None
    plan = set(_words(" ".join(rec.plan.values())))
    played = _words(rec.action)
    verb = verb_of(rec.action)
    for other in scored.options:
        if action_key(other) == action_key(rec.action) or verb_of(other) != verb:
            continue
        theirs = [w for w in _words(other) if w not in played]
        ours = [w for w in played if w not in _words(other)]
        if theirs and ours and all(w in plan for w in theirs) and not any(w in plan for w in ours):
            return (f"The plan named {' '.join(theirs)}; the pick played {' '.join(ours)} "
                    f"({_q(rec.action, 60)}).")
    return None


# the decisions a student should hear about, most telling first (agent_core.decisions); the rest stay in the panels
# (a refused unnamed focus, T1's retry and a failed Sage call have sentences of their own below)
TOLD = ("safeguard", "unsure_focus_replaced", "deferred_focus", "focus_review", "swift_forced", "loop_guard",
        "buffer_fail_limit", "nothing_admissible", "admissible_rerank")


def decision_sentence(rec: StepRecord) -> str | None:
    told = sorted((d for d in rec.decisions if d.kind in TOLD), key=lambda d: TOLD.index(d.kind))
    if not told:
        return None
    text = told[0].describe()
    return text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")


def narrate(rec: StepRecord, header: EpisodeHeader | None = None) -> list[str]:
    """The step in two or three short sentences, readable aloud: who acted and why; the one mechanism that
    mattered most at this step, if any (the Critic or the stagnation detector, then Gate-1, then memory); the
    score. The panels below hold the rest."""
    out = [actor_sentence(rec, header)]
    extra = srm_sentence(rec) if (rec.critic is not None and rec.critic.status in ("called", "failed")) else None
    extra = extra or plan_pick_sentence(rec) or gate1_sentence(rec) or srm_sentence(rec) or task_focus_sentence(rec) or \
        sage_task_focus_sentence(rec) or decision_sentence(rec) or memory_sentence(rec)
    if extra:
        out.append(extra)
    out.append(score_sentence(rec))
    return out


def narration_track(records: list[StepRecord], header: EpisodeHeader | None = None) -> list[str]:
    """The whole episode, one line per step: what a recorded episode reads aloud while it plays."""
    return [f"Step {r.step}. " + " ".join(narrate(r, header)) for r in records]
