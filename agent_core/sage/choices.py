"""Grounding by a short list ("numbered" grounding): Sage picks commands from a short list of valid actions
instead of writing them, so every pick is a command the game accepts in this state. The list is numbered and Sage
answers with a number (`sage.choose_reply = number`); the 1.5B default model answers "11" to nearly every list
whatever it holds (docs/BENCHMARKS.md). `choose_reply = command` shows `- command` lines and Sage copies the one it
picks: it then picks by what the commands say, but the Baseline scored lower that way.

The list is short (`sage.choices`, a few dozen at most) and built from what is relevant now:
1. Swift's own ranking (the valid actions it would take, best first);
2. when a `focus on` is under review, every focus target in view, most likely first (the model's
   full-sequence probabilities, so Sage compares the candidates instead of re-planning from scratch);
3. the valid actions most similar to the plan (sentence-embedding cosine to Q3-Q5), to fill the rest,
   leaving out what only the game's generator would write (`pour cup into kitchen`, `use axe on axe`).
It is shown grouped by command (all `pick up ...` together).
"""
from __future__ import annotations

import re
from typing import Sequence

from ..actions import (action_key, argument_of, is_focus, self_referential, strip_decorations, treats_room_as_object,
                       verb_of)

# how much of the list each source may take (the rest comes from the plan's similarity)
SWIFT_SHARE = 10
# game commands about the game itself, never a step of a plan
META_COMMANDS = frozenset({"task", "reset task", "inventory", "look around"})
FOCUS_SHARE = 8


def build_choices(valid: Sequence[str], plan_text: str, swift_ranked: Sequence[str] = (),
                  focus: Sequence[str] = (), embedder=None, limit: int = 25, swift_share: int = SWIFT_SHARE) -> list[str]:
    """The numbered options, grouped by verb (groups ordered by their best-ranked member). Self-referential
    strings (`use axe on axe`) are never offered; `focus on` is offered only when one is under review or
    Swift ranked it, since a focus ends the task when wrong."""
    valid = [" ".join(v.split()) for v in valid]
    allowed = {v for v in valid if not self_referential(v) and v not in META_COMMANDS}
    picked: list[str] = []

    def add(items: Sequence[str], cap: int) -> None:
        n = 0
        for a in items:
            a = " ".join(a.split())
            if len(picked) >= limit or n >= cap:
                return
            if a in allowed and a not in picked:
                picked.append(a)
                n += 1

    add(swift_ranked, swift_share)
    add(focus, FOCUS_SHARE)
    rest = [v for v in valid if v in allowed and v not in picked and not is_focus(v) and not treats_room_as_object(v)]
    if rest and len(picked) < limit:
        if embedder is not None and plan_text.strip():
            vecs = embedder.encode(rest)
            q = embedder.encode([plan_text])[0]
            order = (vecs @ q).argsort()[::-1]
            add([rest[int(i)] for i in order], limit)
        else:
            add(rest, limit)
    rank = {a: i for i, a in enumerate(picked)}
    first_of_verb: dict[str, int] = {}
    for a in picked:
        first_of_verb.setdefault(verb_of(a) or a.split()[0], rank[a])
    return sorted(picked, key=lambda a: (first_of_verb[verb_of(a) or a.split()[0]], rank[a]))


_TASK_STOP = frozenset({"the", "a", "an", "of", "in", "on", "to", "containing", "with", "and"})


def task_names(action: str, task: str) -> bool:
    """Does the task description name the object of this `focus on` (every word of it; a location such as "in
    kitchen" aside)?"""
    obj = re.split(r"\s+in\s+", argument_of(action))[0]
    words = set(re.findall(r"[a-z0-9]+", obj)) - _TASK_STOP
    return bool(words) and words <= set(re.findall(r"[a-z0-9]+", task.lower()))


def format_choices(options: Sequence[str], numbered: bool = True) -> str:
    """`1. go to kitchen` lines, or `- go to kitchen` where Sage answers with the command itself (a 1.5B model
    asked for a number answers "11" whatever the list holds: docs/BENCHMARKS.md)."""
    return "\n".join(f"{i}. {a}" if numbered else f"- {a}" for i, a in enumerate(options, 1))


_INT = re.compile(r"(?<![\w.])#?(\d{1,3})(?![\w])")
_LIST_LINE = re.compile(r"^[\s\d,;.#()\[\]&+-]*(?:(?:and|then)[\s\d,;.#()\[\]&+-]*)*$", re.I)
_LEAD = re.compile(r"^(?:[-*•>]+\s*)?(?:(?:option|choice|number|no\.?)\s*)?#?(\d{1,3})\s*[.):\-]?\s*(.*)$", re.I)
_BULLET = re.compile(r"^(?:[-*•>]+|step\s*\d+\s*[:.)]|commands?\s*:)\s*", re.I)


def parse_choices(text: str, options: Sequence[str], limit: int = 5) -> tuple[list[str], list[str], list[str]]:
    """Sage's picks from a messy reply: (actions, how, problems), in order, each at most once.

    - a line of numbers only ("3, 7 and 12") gives those options;
    - "4. pick up thermometer": the command written wins when it is one of the options or a command of
      its own (the number may just be list numbering); otherwise the number counts;
    - a command without a number ("pick up thermometer") is taken as written (Gate-1 or the mapping
      then checks it, as for a free-form answer);
    - prose ("I choose option 4") gives its first number.
    Out-of-range numbers and repeats are dropped and reported. `how` says which rule gave each pick:
    number | echo (the option's text) | free (a command not in the list)."""
    by_key = {action_key(o): o for o in options}
    picks: list[str] = []
    how: list[str] = []
    problems: list[str] = []

    def take(action: str, kind: str) -> None:
        if action in picks:
            problems.append(f"option {action!r} repeated")
        else:
            picks.append(action)
            how.append(kind)

    def number(n: int) -> None:
        if 1 <= n <= len(options):
            take(options[n - 1], "number")
        else:
            problems.append(f"option {n} is not in the list (1-{len(options)})")

    for raw in text.replace("`", " ").splitlines():
        line = raw.strip().strip("*").strip()
        if not line or len(picks) >= limit:
            continue
        if _LIST_LINE.match(line):
            for n in (int(m) for m in _INT.findall(line)):
                if len(picks) < limit:
                    number(n)
            continue
        lead = _LEAD.match(line)
        rest = (lead.group(2) if lead else _BULLET.sub("", line)).strip(" .,:\"'*")
        written, _ = strip_decorations(rest)
        if rest and action_key(written) in by_key:
            take(by_key[action_key(written)], "echo")
        elif rest and verb_of(written) and len(written.split()) <= 12:
            take(" ".join(written.split()), "free")
        elif lead:
            number(int(lead.group(1)))
        else:
            nums = _INT.findall(line)
            if nums:
                number(int(nums[0]))
    if not picks:
        problems.append("no option number or command in the reply")
    return picks[:limit], how[:limit], problems
