"""Questions a recorded episode answers exactly, answered from its typed step records before any model is asked.

"Who acted at step 6 and why?", "What did Gate-1 drop?", "Which memory won at step 12?", "What earned you points at
step 9?", "Why did you go to the kitchen?", "When did Sage take over?", "How did the episode end?": the step records
hold the answer, so it is built from them (the same sentences as the narration, views/narration.py) and cites the
memory of each step it is about. A model may then phrase it (pages/6_Ask.py), but a phrasing that loses a quoted
action or a number is not shown. Anything else goes to the memory stream and the model (memory_store/interview.py).
Pure functions, no Streamlit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent_core.actions import ROOMS, VERB_ALIASES, VERBS, is_move, normalize
from agent_core.trace import EpisodeHeader, EpisodeSummary, StepRecord
from views.common import episode_mechanisms
from views.narration import WHY, actor_sentence, memory_use, narrate, score_sentence, srm_sentence, stuck_window

_STEP = re.compile(r"\bstep\s*#?\s*(\d+)", re.I)
_WHY_DID = re.compile(r"^\s*(?:why|when)\s+did\s+(?:you|the agent|it)\s+(.+?)\s*\??\s*$", re.I)
_QUOTED = re.compile(r"'([^']+)'")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?")
SYSTEMS = {"swift": "Swift", "sage": "Sage", "critic": "the Critic", "user": "you", "branch": "a branch"}
NEGATIONS = frozenset({"never", "not", "no", "none", "nothing", "without"})


@dataclass
class RecordAnswer:
    kind: str  # gate1 | memory | critic | step | action | sage | outcome
    text: str  # the answer in the records' own words
    steps: list[int] = field(default_factory=list)  # the steps it is about: their memories are cited

    must: list[str] = field(default_factory=list)  # words a rephrasing must keep besides the quotes and numbers

    def keep(self) -> list[str]:
        """What a rephrasing must keep: every quoted action, every number outside them (a step number, a score;
        not the 1 of "Gate-1"), every negation ("I was in the hallway" for "I never went to the bathroom" says the
        opposite of nothing) and the answer's own `must` words."""
        rest = re.sub(r"gate-1", " ", _QUOTED.sub(" ", self.text), flags=re.I)
        negations = {w for w in re.findall(r"[a-z]+", rest.lower()) if w in NEGATIONS}
        return sorted(set(_QUOTED.findall(self.text)) | set(_NUMBER.findall(rest)) | negations | set(self.must))


def _q(text: str) -> str:
    return "'" + " ".join(str(text).split()) + "'"


def _steps_list(steps: list[int], n: int = 8) -> str:
    head = ", ".join(str(s) for s in steps[:n])
    return head + (f" and {len(steps) - n} more" if len(steps) > n else "")


def _at(records: list[StepRecord], k: int) -> StepRecord | None:
    return next((r for r in records if r.step == k), None)


def _gate1(header: EpisodeHeader, records: list[StepRecord], k: int | None) -> RecordAnswer:
    if "gate1" not in episode_mechanisms(header):
        return RecordAnswer("gate1", f"Gate-1 was not on in this episode (preset {header.config.get('preset', '?')}), "
                                     "so it checked and dropped nothing.")
    if k is not None:
        rec = _at(records, k)
        drops = [g for g in rec.gate1 if g.decision == "DROP"]
        if not drops:
            checked = (f"it checked {len(rec.gate1)} action(s)" if rec.gate1 else
                       "it had nothing to check (the action came from a menu answer or the buffer's replay)")
            return RecordAnswer("gate1", f"Gate-1 dropped nothing at step {k}: {checked}, and {_q(rec.action)} "
                                         f"ran.", [k])
        lines = [f"At step {k} Gate-1 dropped {_q(g.proposed)} from {SYSTEMS.get(g.source, g.source)}: "
                 f"{g.detail or g.reason}." for g in drops]
        return RecordAnswer("gate1", " ".join(lines) + f" The action that ran was {_q(rec.action)}.", [k])
    drops = [(r.step, g) for r in records for g in r.gate1 if g.decision == "DROP"]
    if not drops:
        n = sum(len(r.gate1) for r in records)
        return RecordAnswer("gate1", f"Gate-1 checked {n} actions in this episode and dropped none.")
    shown = drops[:5]
    text = (f"Gate-1 dropped {len(drops)} action(s) in this episode. "
            + " ".join(f"Step {s}: {_q(g.proposed)} from {SYSTEMS.get(g.source, g.source)} ({g.reason})." for s, g in shown)
            + (f" {len(drops) - len(shown)} more are in the Gate-1 panels." if len(drops) > len(shown) else ""))
    return RecordAnswer("gate1", text, sorted({s for s, _ in shown}))


def _memory(header: EpisodeHeader, records: list[StepRecord], k: int | None) -> RecordAnswer:
    if "amm" not in episode_mechanisms(header) and not any(r.retrievals for r in records):
        return RecordAnswer("memory", "This episode ran without episodic memory (AMM was off), so no memory was "
                                      "retrieved or used.")
    recs = [_at(records, k)] if k is not None else [r for r in records if r.retrievals]
    lines: list[str] = []
    used: list[int] = []
    for rec in recs:
        for x in rec.retrievals:
            if x.error:
                lines.append(f"At step {rec.step} the memory lookup ({x.trigger}) failed: {x.error}.")
            elif x.injected_ids:
                into, top, best = memory_use(x)
                won = (f"; the one that won was {top.id} ({top.tag or top.type}), mostly on {best}" if top is not None
                       else f"; the first was {x.injected_ids[0]}")
                lines.append(f"At step {rec.step} memory {x.trigger} gave {into} {len(x.injected_ids)} record(s)"
                             f"{won}.")
            elif k is not None:
                n = len(x.result.top_ids) if x.result else 0
                lines.append(f"At step {rec.step} memory {x.trigger} retrieved {n} record(s) but put none into a "
                             f"prompt.")
            else:
                continue
            used.append(rec.step)
    if not lines:
        where = f"at step {k}" if k is not None else "in this episode"
        return RecordAnswer("memory", f"No memory was retrieved {where}.", [k] if k is not None else [])
    more = len(lines) - 5
    return RecordAnswer("memory", " ".join(lines[:5]) + (f" {more} more retrievals are in the memory panels."
                                                          if more > 0 else ""), sorted(set(used))[:5])


def _critic(records: list[StepRecord], k: int | None) -> RecordAnswer:
    calls = [r for r in records if r.critic is not None and (k is None or r.step == k)]
    if not calls:
        return RecordAnswer("critic", "The Critic was not called " + (f"at step {k}." if k is not None else
                                                                        "in this episode."),
                            [k] if k is not None else [])
    lines = [f"Step {r.step}: {srm_sentence(r)}" for r in calls[:5]]
    return RecordAnswer("critic", " ".join(lines), [r.step for r in calls[:5]])


def _step(question: str, header: EpisodeHeader, rec: StepRecord) -> RecordAnswer:
    if re.search(r"\b(point|points|score|earn|earned|reward)\b", question, re.I):
        said = score_sentence(rec)
        gain = f"It earned {rec.reward:+g} points. " if rec.reward > 0 and "earned" not in said else ""
        text = f"At step {rec.step} I did {_q(rec.action)}. {gain}{said} {actor_sentence(rec, header)}"
    elif rec.system == "user":
        text = f"At step {rec.step} you typed the action: " + " ".join(narrate(rec, header))
    else:
        # the action in full (the narration cuts a long one at a word): the answer must name what was played
        text = (f"At step {rec.step} {SYSTEMS.get(rec.system, rec.system)} acted, playing '{rec.action}': "
                + " ".join(narrate(rec, header)))
    return RecordAnswer("step", text, [rec.step])


def _looks_like_action(phrase: str) -> bool:
    s = " ".join(phrase.lower().split())
    return any(s == v or s.startswith(v + " ") for v in (*VERBS, *VERB_ALIASES))


def _action(phrase: str, header: EpisodeHeader, records: list[StepRecord]) -> RecordAnswer | None:
    """'Why did you go to the kitchen?': the steps that played that action (or entered that room). "Never" only
    where the records can say it for sure: a room no step moved to. Any other wording the records do not match
    ("the thermometer" for "mercury thermometer", "so long") goes to the memories instead."""
    if not _looks_like_action(phrase):
        return None
    want = normalize(phrase)
    hits = [r for r in records if normalize(r.action) == want]
    if not hits:  # every word of the question's action in the played one: "pick up thermometer"
        words = set(want.split())
        hits = [r for r in records if words <= set(normalize(r.action).split())]
    if not hits and is_move(phrase):
        room = next((room for room in ROOMS if re.search(rf"\b{room}\b", want)), None)
        if room is not None:
            hits = [r for r in records if is_move(r.action) and room in normalize(r.action)]
            if not hits:
                rooms = []
                for r in records:
                    if r.room and r.room not in rooms:
                        rooms.append(r.room)
                where = f": the rooms I was in were {', '.join(rooms)}" if rooms else ""
                return RecordAnswer("action", f"I never went to the {room} in this episode{where}.", must=[room])
    if not hits:
        return None
    first = hits[0]
    when = f"at step {first.step}" if len(hits) == 1 else f"at steps {_steps_list([r.step for r in hits])}"
    return RecordAnswer("action", f"I did {_q(first.action)} {when}. The first time: {actor_sentence(first, header)}",
                        [first.step])


def _sage(header: EpisodeHeader, records: list[StepRecord]) -> RecordAnswer:
    called = [r for r in records if r.trigger is not None and r.trigger.name in WHY]
    acted = [r.step for r in records if r.system == "sage"]
    if not called and not acted:
        by = {}
        for r in records:
            by[SYSTEMS.get(r.system, r.system)] = by.get(SYSTEMS.get(r.system, r.system), 0) + 1
        return RecordAnswer("sage", "Sage was never asked in this episode; the actions came from "
                                    + ", ".join(f"{who} ({n})" for who, n in by.items()) + ".")
    reasons: dict[str, int] = {}
    for r in called:
        reasons[r.trigger.name] = reasons.get(r.trigger.name, 0) + 1
    k = stuck_window(header)
    why = "; ".join(f"{n} time(s) because {WHY[name].format(k=k)}" for name, n in reasons.items())
    asked = (f"Sage was asked {len(called)} time(s), at step(s) {_steps_list([r.step for r in called])} ({why})."
             if called else "No switching rule asked Sage in this episode.")
    return RecordAnswer("sage", f"{asked} Sage's actions were played at {len(acted)} step(s).",
                        [called[0].step] if called else acted[:1])


def _outcome(header: EpisodeHeader, records: list[StepRecord], summary: EpisodeSummary | None) -> RecordAnswer:
    if not records:
        return RecordAnswer("outcome", "The episode has no steps yet.")
    last = records[-1]
    if summary is None:
        return RecordAnswer("outcome", f"The episode has not ended: after {len(records)} steps the score is "
                                       f"{last.score:g}.", [last.step])
    how = {"success": "the task was completed", "failure": "the task failed", "step_limit": "it reached its step "
           "limit", "stopped": "it was stopped", "error": "it stopped on an error"}.get(summary.reason, summary.reason)
    return RecordAnswer("outcome", f"The episode ended after {summary.steps} steps because {how}; the final score "
                                   f"was {summary.final_score:g}.", [last.step])


def answer_from_records(question: str, header: EpisodeHeader, records: list[StepRecord],
                        summary: EpisodeSummary | None = None) -> RecordAnswer | None:
    """The exact answer when the records hold it, else None (the question goes to the memories and the model)."""
    q = " ".join(question.split())
    m = _STEP.search(q)
    k = int(m.group(1)) if m else None
    if k is not None and _at(records, k) is None:
        return RecordAnswer("step", f"This episode has {len(records)} steps, so there is no step {k}.")
    low = q.lower()
    if re.search(r"gate[- ]?1\b|gate one", low):
        return _gate1(header, records, k)
    if re.search(r"\bcritic\b", low):
        return _critic(records, k)
    if re.search(r"memor|retriev|recall", low) and (k is not None or re.search(r"\b(won|win|which|used|inject)", low)):
        return _memory(header, records, k)
    if k is not None:
        return _step(q, header, _at(records, k))
    if re.search(r"\bsage\b", low) and re.search(r"\b(when|how many|how often|take over|took over|called|asked)\b", low):
        return _sage(header, records)
    why = _WHY_DID.match(q)
    if why:
        found = _action(why.group(1), header, records)
        if found is not None:
            return found
    if re.search(r"final score|how did (?:it|the episode|the task) end|did you (?:win|succeed|finish|complete)", low):
        return _outcome(header, records, summary)
    return None
