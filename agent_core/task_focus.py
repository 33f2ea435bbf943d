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

from .actions import argument_of, canonical, is_focus
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


@dataclass(frozen=True)
class TaskFocusRule:
    task: str
    names_objects: bool  # the task's descriptions name what to focus on (else nothing is checked)
    template: frozenset[str]  # words that do not tell the variation's object from another
    train_pass_rate: float  # share of train gold focuses that pass (1.0 for every task that names objects)

    def allows(self, target: str, description: str, context: str = "") -> bool:
        if not self.names_objects:
            return True
        return _passes(target, description, context, self.template)


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
    return TaskFocusRule(task, rate >= NAMED_MIN, template, round(rate, 4))


def unnamed_focus_actions(task: str, description: str, valid_actions: list[str] | tuple[str, ...],
                          context: str = "") -> list[str]:
    """The valid `focus on ...` actions whose object the task does not name (empty where nothing is checked)."""
    rule = rule_for(task) if task else None
    if rule is None or not rule.names_objects:
        return []
    return [v for v in valid_actions if is_focus(v) and not rule.allows(argument_of(canonical(v)), description, context)]
