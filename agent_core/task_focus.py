"""Does the task name the object Swift is about to focus on?

Most ScienceWorld tasks name what to focus on ("boil tin", "create violet paint", "the life stages of the
lemon plant", "focus on the red box"), and a wrong `focus on` ends the task at -100. Swift was trained on
the train variations (boil *water*, *green* paint) and on test variations it focuses on what it saw there:
31 of the 33 endings at -100 of the Swift-only benchmark were a focus on something the task does not name
(docs/BENCHMARKS.md). This check reads the task description before a focus is allowed.

What it knows comes from the train gold paths only (agent_core.gold), per task:
* whether the task names its focus objects at all: in find-* and lifespan-* it does not ("focus on the
  thing"), there nothing is checked;
* the task's *template words*: words of the gold focus targets that say nothing about the variation
  ("paint" in every paint task, "inclined plane", "light bulb"; words that are in (almost) every or (almost)
  no description of the task). A target passes when one of its other words is in the description, or when
  it has no other word (then there is nothing to judge).
`substance in metal pot` is read through the room / inventory text (`metal pot (containing a substance
called water)`), so in "boil tin" a pot of water is not the substance.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from .actions import argument_of, canonical, is_focus, never_a_focus_target
from .gold import train_gold

# words that never tell one object from another (task-description boilerplate and grammar)
STOP = frozenset("""the a an of in on to is your task and with it that this which be are at if then first next
when you done focus by using its from for as or has have will can may must into onto called containing located
around after completing experiment determine whether find create use make what there inventory""".split())
NAMED_MIN = 0.98  # share of train gold focuses that pass the check for the task to count as naming its objects
TEMPLATE_IN_TARGETS = 0.5  # a template word is in at least half of the task's gold focus targets...
TEMPLATE_DESC_SHARE = 0.1  # ...and in <= 10% or >= 90% of its descriptions (a constant, not a variation's name)


def _singular(w: str) -> str:
    if len(w) > 3 and w.endswith("es") and w[:-2].endswith(("x", "s", "sh", "ch")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def words(text: str) -> list[str]:
    """Content words, lower case, singular; hyphens split (`violet-red` -> violet, red)."""
    return [_singular(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]


_SUBSTANCE_IN = re.compile(r"^substance in (.+)$")


def target_names(target: str, context: str = "") -> list[list[str]] | None:
    """What a focus target is called, for the check: the object before its location (`apple seed in flower
    pot 2` -> `apple seed`), then the whole target; for `substance in X`, what X contains according to
    `context` (the room and inventory text), any of them. None when that cannot be read (then the target is
    not judged)."""
    t = " ".join(target.lower().split())
    m = _SUBSTANCE_IN.match(t)
    if m:
        return [[n] for n in _contents(m.group(1), context)] or None
    head, _sep, container = t.partition(" in ")
    head = head.split(" containing ")[0]
    # `paint in bowl`: what the bowl holds says which paint
    return [[head, *_contents(container, context), t]]


def _contents(container: str, context: str) -> list[str]:
    """What the room / inventory text says `container` holds (`metal pot (containing a substance called
    water)` -> water); several containers of that name: each one's contents."""
    if not container:
        return []
    found = re.findall(r"\b" + re.escape(container) + r"\s*\(containing (?:a substance called )?([^)]*)\)",
                       context.lower())
    return [f.strip() for f in found if f.strip() and f.strip() != "nothing"]


_FOCUS_PHRASE = re.compile(r"focus on (?:the |a |an )?([^.,;]+)", re.I)


def focus_order(description: str) -> list[tuple[int, set[str]]]:
    """The focuses the description asks for, in its order: (rank, words). "First, focus on the thermometer.
    Next, focus on the tin. If ..., focus on the red box. If ..., focus on the green box." -> thermometer 0,
    tin 1, red box 2, green box 2 (alternatives of one decision share a rank)."""
    out: list[tuple[int, set[str]]] = []
    rank, prev_if = -1, False
    for sentence in re.split(r"(?<=[.!?])\s+", description):
        for m in _FOCUS_PHRASE.finditer(sentence):
            is_if = sentence.strip().lower().startswith("if ")
            if not (is_if and prev_if):
                rank += 1
            prev_if = is_if
            out.append((rank, set(words(m.group(1)))))
    return out


def _phrase_of(target: str, context: str, order: list[tuple[int, set[str]]]) -> int | None:
    """The rank of the description's focus phrase that names `target` (most shared words), None if none does."""
    # all of the object's words count here, template ones too: "thermometer" names the first phrase
    chains = target_names(target, context) or []
    own = {w for chain in chains for w in words(chain[0])}
    best = max(((len(own & ws), -rank, rank) for rank, ws in order), default=(0, 0, None))
    return best[2] if best[0] > 0 else None


@dataclass(frozen=True)
class TaskFocusRule:
    task: str
    names_objects: bool  # the task's descriptions name what to focus on (else nothing is checked)
    template: frozenset[str]  # words that do not tell the variation's object from another
    train_pass_rate: float  # share of train gold focuses that pass (1.0 for every task that names objects)
    # the description orders its focuses ("First ... Next ... If ...") and every train gold path follows that
    # order: a focus named later is not an option before the earlier ones are done
    ordered: bool = False

    def allows(self, target: str, description: str, context: str = "") -> bool:
        if not self.names_objects:
            return True
        return _passes(target, description, context, self.template)

    def in_order(self, target: str, description: str, context: str, done: list[tuple[str, str]]) -> bool:
        """May `target` be focused now, given the focuses `done` so far ((target, context) each)?"""
        if not self.ordered:
            return True
        order = focus_order(description)
        rank = _phrase_of(target, context, order)
        if rank is None:
            return True
        reached = {_phrase_of(t, c, order) for t, c in done}
        return all(r in reached for r in range(rank))


def _passes(target: str, description: str, context: str, template: frozenset[str]) -> bool:
    chains = target_names(target, context)
    if chains is None:
        return True
    desc = set(words(description))
    return any(_chain_passes(chain, desc, template) for chain in chains)


def _chain_passes(chain: list[str], desc: set[str], template: frozenset[str]) -> bool:
    # the object's own name first; when that is all template words (`paint in cup containing yellow paint`),
    # the whole target, location and contents included; nothing left to judge: it passes
    for name in chain:
        own = [w for w in words(name) if w not in template]
        if own:
            return any(w in desc for w in own)
    return True


@lru_cache(maxsize=None)
def rule_for(task: str) -> TaskFocusRule | None:
    """The task's rule, learned from its train gold paths (None: no gold for the task, nothing is checked)."""
    rows = [r for r in train_gold().get(task, []) if r.focus]
    if not rows:
        return None
    focuses = [(r.description, target, ctx) for r in rows for target, ctx in r.focus]
    in_targets: Counter[str] = Counter()
    for _d, target, ctx in focuses:
        chains = target_names(target, ctx)
        if chains:  # the object's own name (its location and contents are not what the variation changes)
            in_targets.update(set(w for chain in chains for w in words(chain[0])))
    descriptions = {d for d, _t, _c in focuses}
    in_desc: Counter[str] = Counter(w for d in descriptions for w in set(words(d)))
    nd = len(descriptions)
    template = frozenset(w for w, c in in_targets.items() if c >= TEMPLATE_IN_TARGETS * len(focuses) and (
        in_desc[w] >= (1 - TEMPLATE_DESC_SHARE) * nd or in_desc[w] <= TEMPLATE_DESC_SHARE * nd))
    rate = sum(_passes(t, d, c, template) for d, t, c in focuses) / len(focuses)
    rule = TaskFocusRule(task, rate >= NAMED_MIN, template, round(rate, 4))
    multi = [r for r in rows if len({rank for rank, _w in focus_order(r.description)}) > 1]
    ordered = TaskFocusRule(task, True, template, rule.train_pass_rate, ordered=True)
    if rule.names_objects and multi and all(
            ordered.in_order(t, r.description, c, r.focus[:i]) for r in multi for i, (t, c) in enumerate(r.focus)):
        return ordered
    return rule


def unnamed_focus_actions(task: str, description: str, valid_actions: list[str] | tuple[str, ...],
                          context: str = "", done: list[tuple[str, str]] | None = None) -> list[str]:
    """The valid `focus on ...` actions that are not options now: the inventory, the air, a room or a door (no
    task of the game focuses on them, whether or not it names its objects); and, where the task names its
    objects, one it does not name, or (where the task orders its focuses) one it names for later. `done`: the
    episode's focuses so far, (target, context) each. Without a known task name nothing is checked."""
    rule = rule_for(task) if task else None
    if rule is None:
        return []
    out = []
    for v in valid_actions:
        if not is_focus(v):
            continue
        if never_a_focus_target(v):
            out.append(v)
            continue
        if not rule.names_objects:
            continue
        target = argument_of(canonical(v))
        if not rule.allows(target, description, context) or not rule.in_order(target, description, context,
                                                                              done or []):
            out.append(v)
    return out
