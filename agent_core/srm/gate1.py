"""Gate-1 (docs/AGENT.md §6.1; checks in the reference code's order): every action from every source (Swift, Sage's
buffer, the Critic) passes it before it runs, when SRM is on:

    normalize -> checks (focus limit, focus target visible, no-op) -> admissibility against the valid actions
    -> a deterministic repair when the mismatch is small and safe -> otherwise drop.

A repair never changes the verb (the action template) and never changes the object of `focus on`. Every
decision is a typed `Gate1Decision` in the step record with a reason code from `REASONS`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..actions import (ARTICLES, MOVE_VERBS, ROOMS, action_key, argument_of, canonical, is_focus, names_everything,
                       normalize, part_namings, same_verb_class, seen_by_another_name, seen_in_reach, self_referential,
                       split_verb, stages_shown, strip_decorations, unseen_words, verb_of)
from ..config import SRMConfig
from ..trace import Gate1Decision

ACCEPT, REPAIR, DROP = "ACCEPT", "REPAIR", "DROP"

# reason code -> the reason in words (the app shows these; `detail` adds the specifics of one action)
REASONS: dict[str, str] = {
    "VALID": "a valid action of the current state, as written",
    "REPAIR_CASE": "differed from a valid action only in upper/lower case",
    "REPAIR_SPACING": "differed from a valid action only in spacing or punctuation",
    "REPAIR_PREFIX": "a leading label such as 'Action 3:' was removed",
    "REPAIR_ARROW": "a trailing '--> expected observation' was cut off",
    "REPAIR_COMMENT": "a remark in parentheses, such as '(reward +0)', was removed",
    "REPAIR_ARTICLES": "differed from a valid action only in articles (the, a, an, some)",
    "REPAIR_ALIAS": "a known alias of the same command (go to X = teleport to X, turn on = activate, take = pick up)",
    "REPAIR_NAME": "the object's one-letter label (as in 'unknown substance U') is left out of the game's valid-action "
                   "names; same object",
    "REPAIR_WHERE": "named its object by where it is ('in inventory'), by its life stage, or an electrical part "
                    "as 'battery anode' (the list says 'anode in battery'): the game's valid-action name of the same "
                    "object",
    "REPAIR_TYPO": "a small typo: within a few character edits of exactly one valid action with the same verb",
    "REPAIR_NEAREST": "the most similar valid action with the same verb that names every object the action names "
                      "(one-object commands only; an LLM's wording, not a new command)",
    "NOT_IN_VALID_ACTIONS": "not a valid action in the current state, and no small, safe repair makes it one",
    "NO_VERB": "no known command verb: it cannot be checked or repaired safely",
    "FOCUS_TARGET_NOT_VISIBLE": "'focus on' an object that is neither in the room nor in the inventory",
    "TARGET_NOT_VISIBLE": "names an object that is not in the room, the inventory or an open container (the game "
                          "lists what is inside closed containers too, and answers 'No known action' when it is "
                          "played)",
    "FOCUS_LIMIT": "one 'focus on' too many: the task takes only so many, and a wrong focus ends it",
    "FOCUS_REPEAT": "'focus on' an object this episode already focused on (named the same way): the game takes it "
                    "as the task's next focus, which ends a task that asks for two focuses, and changes nothing in a "
                    "task that asks for one",
    "NO_OP_ALREADY_OPEN": "opening something that is already open (it would change nothing)",
    "NO_OP_ALREADY_CLOSED": "closing something that is already closed (it would change nothing)",
    "NO_OP_ALREADY_ACTIVE": "activating something that is already on (it would change nothing)",
    "NO_OP_ALREADY_INACTIVE": "deactivating something that is already off (it would change nothing)",
    "STAGNATION_AVOID": "the stagnation report says to avoid this action for now",
    "CRITIC_NO_FOCUS": "the Critic may not 'focus on' anything (its constraints): a stuck agent is not sure",
    "CONSTRAINT_NO_FOCUS": "no 'focus on' while a stagnation report's constraints bind: a stuck agent is not sure",
    "FALLBACK_FOCUS": "a 'focus on' is never taken as a fallback after Swift's own first choice was dropped",
    "EMPTY": "an empty action",
    "MENU_CHOICE": "an answer to ScienceWorld's numbered ambiguity menu",
    "MENU_CANCEL": "the ambiguity menu was cancelled (a blank answer) rather than guessing a 'focus on' target",
}
# ScienceWorld's category names for objects in scope: they never appear in the room text as such
GENERIC_REFERENTS = frozenset({"object", "thing", "living thing", "non-living thing", "cloth sittable", "sittable",
                               "substance", "organism", "animal", "plant"})
TWO_OBJECT_VERBS = frozenset({"move", "pour", "dunk", "use", "connect"})
REPAIR_KIND = {"prefix": "REPAIR_PREFIX", "arrow": "REPAIR_ARROW", "comment": "REPAIR_COMMENT",
               "punctuation": "REPAIR_SPACING", "spacing": "REPAIR_SPACING"}


@dataclass
class GateContext:
    """What Gate-1 checks an action against: the current state, never the agent's internals."""

    valid: Sequence[str]
    look: str = ""
    inventory: str = ""
    focus_done: int = 0  # `focus on` actions taken so far in this episode
    focus_unrewarded: int = 0  # of those, the ones the game took without a reward (the episode went on)
    focus_unrewarded_gold: int = 0  # the most a train gold path of the task takes without a reward
    focus_limit: int | None = None  # the task's (from train gold paths); None = unknown, not checked
    focused: Sequence[str] = ()  # the objects this episode's taken focuses named (`focus on X` -> X)
    avoid: Sequence[str] = ()  # a live stagnation report's actions to avoid (Swift and Sage)
    no_focus: bool = False  # a live stagnation report's constraint: no `focus on` now (Swift and Sage)
    embedder: object | None = None  # for REPAIR_NEAREST; None disables it
    # the game's names of each object in scope (ScienceWorld.object_names), asked only before a TARGET_NOT_VISIBLE
    # drop: an object the room text shows under another name is in view. None: the text's words alone
    object_names: Callable[[], Mapping[str, Sequence[str]]] | None = None
    # where the game's object tree puts each object of the room (ScienceWorld.reach: True within reach, False in a
    # closed container), asked only before a TARGET_NOT_VISIBLE drop under srm.gate1_unseen_by = "tree"
    reach: Callable[[], Mapping[str, bool]] | None = None
    _by_key: dict[str, str] = field(default_factory=dict, repr=False)
    _by_norm: dict[str, str] = field(default_factory=dict, repr=False)

    def by_key(self) -> dict[str, str]:
        if not self._by_key:
            for v in self.valid:
                self._by_key.setdefault(action_key(v), v)
        return self._by_key

    def by_norm(self) -> dict[str, str]:
        if not self._by_norm:
            for v in self.valid:
                self._by_norm.setdefault(normalize(v), v)
        return self._by_norm


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", (text or "").lower()))


def focus_target_visible(target: str, look: str, inventory: str) -> bool:
    """Every content word of the target appears in the room or inventory text ("cup containing nothing"
    matches "a glass cup (containing nothing)")."""
    words = _words(ARTICLES.sub(" ", target)) - {"in", "on", "of", "containing", "with", "to"}
    return bool(words) and words <= _words(look) | _words(inventory)


_WHERE = re.compile(r"\s+in\s+(?:inventory|" + "|".join(re.escape(r) for r in ROOMS) + r")\s*$")


def _object_words(name: str) -> frozenset[str]:
    """An object's words as a `focus on` names it, in any order, without a trailing " in inventory" or " in <room>"
    (`thermometer in inventory` is the thermometer); any other place stays ("lemon tree in flower pot 5" is not the
    lemon tree in pot 6), and so does a one-letter label ("unknown substance A")."""
    return frozenset(re.findall(r"[a-z0-9]+", _WHERE.sub("", re.sub(r"\bthe\b", " ", name.lower()).strip())))


def refocuses(target: str, focused: Sequence[str]) -> str | None:
    """The earlier focus (its object as that action named it) that `target` names again, else None. Only the same
    words count: a name that shares words ("paint" for the green paint, "cup containing green paint") or a life
    stage the game answers with the same species name ("adult lemon tree", "lemon tree in flower pot 5") is not
    taken for the same object."""
    words = _object_words(target)
    return next((f for f in focused if words and _object_words(f) == words), None)


_STATE_WORDS = {
    "open": ("NO_OP_ALREADY_OPEN", ("is open", "that is open", "are open")),
    "close": ("NO_OP_ALREADY_CLOSED", ("is closed", "that is closed", "are closed")),
    "activate": ("NO_OP_ALREADY_ACTIVE", ("turned on", "is on", "is activated")),
    "deactivate": ("NO_OP_ALREADY_INACTIVE", ("turned off", "is off", "is deactivated")),
}


def no_op_reason(action: str, look: str) -> str | None:
    """Opening what is open, activating what is on, ...: judged from the one line of `look` that names the
    object (ambiguous or absent objects are never judged a no-op)."""
    verb = verb_of(action)
    if verb not in _STATE_WORDS:
        return None
    target = argument_of(action)
    if not target:
        return None
    pat = re.compile(rf"\b{re.escape(target)}\b")
    lines = [ln for ln in (look or "").lower().splitlines() if pat.search(ARTICLES.sub("", ln))]
    if len(lines) != 1:
        return None
    # only the object's own first sentence: "a fridge. The fridge door is closed. In the fridge is: ..."
    line = lines[0]
    head = line.split(" in the ")[0].split(" on the ")[0].split(":")[0]
    code, phrases = _STATE_WORDS[verb]
    return code if any(p in head for p in phrases) else None


def _edit_distance(a: str, b: str, cap: int) -> int:
    """Levenshtein distance, stopping early past `cap`."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        if min(cur) > cap:
            return cap + 1
        prev = cur
    return prev[-1]


class Gate1:
    def __init__(self, cfg: SRMConfig | None = None):
        self.cfg = cfg or SRMConfig()

    def check(self, proposed: str, source: str, ctx: GateContext, fallback: bool = False) -> Gate1Decision:
        """Gate-1 on one action. `fallback`: a lower-ranked Swift candidate tried because a better one was
        dropped (it may not be a `focus on`: a wrong focus ends the task, and Swift did not choose it)."""
        def out(decision: str, reason: str, result: str | None = None, detail: str = "",
                similarity: float | None = None) -> Gate1Decision:
            return Gate1Decision(source=source, proposed=proposed, decision=decision, result=result, reason=reason,
                                 normalized=text, detail=detail or REASONS[reason], similarity=similarity)

        text, kinds = strip_decorations(proposed)
        early = self.precheck(proposed, source)
        if early is not None:
            return early
        verb = verb_of(text)
        # --- checks on what the action means (reference order: focus count, focus target, no-op)
        if is_focus(text):
            target = argument_of(text)
            if fallback:
                return out(DROP, "FALLBACK_FOCUS")
            if ctx.no_focus and source in ("swift", "sage"):
                return out(DROP, "CONSTRAINT_NO_FOCUS")
            # "rewarded": an unrewarded focus (the episode went on) beyond the ones the task's own gold paths take
            # was not one of the task's focuses (a wrong focus in grow-plant), so it does not count
            spare = max(0, ctx.focus_unrewarded - ctx.focus_unrewarded_gold)
            spent = ctx.focus_done - (spare if self.cfg.focus_limit_counts == "rewarded" else 0)
            if ctx.focus_limit is not None and spent >= ctx.focus_limit:
                return out(DROP, "FOCUS_LIMIT", detail=f"this task takes {ctx.focus_limit} 'focus on' action(s) "
                                                       f"and {spent} were already taken" +
                                                       (f" ({spare} unrewarded one(s) not counted)" if spare else ""))
            if self.cfg.gate1_focus_repeat and refocuses(target, ctx.focused):
                return out(DROP, "FOCUS_REPEAT", detail=f"this episode already focused on "
                                                        f"'{refocuses(target, ctx.focused)}'")
            # the game's generic names for an object in scope ("focus on object" for a finger painting) are
            # visible whenever the game offers them; a named target must show in the room or inventory text
            # (the valid actions also list what is inside a closed fridge)
            generic = target in GENERIC_REFERENTS and action_key(text) in ctx.by_key()
            if not generic and not focus_target_visible(target, ctx.look, ctx.inventory):
                return out(DROP, "FOCUS_TARGET_NOT_VISIBLE",
                           detail=f"'{target}' is neither in the room nor in the inventory")
        noop = no_op_reason(text, ctx.look)
        if noop:
            return out(DROP, noop, detail=f"{REASONS[noop]}: '{argument_of(text)}'")
        # --- admissibility, then the smallest safe repair
        result, reason, sim = self._admit(text, kinds, verb, source, ctx)
        if result is None:
            return out(DROP, reason)
        if self.cfg.gate1_target_unseen and (ctx.look or ctx.inventory) and not is_focus(result):
            # judged on the admitted action (a typo repaired first); a focus has its own check above
            missing = unseen_words(result, ctx.look, ctx.inventory)
            if missing and ctx.object_names is not None:
                missing = seen_by_another_name(result, missing, ctx.look, ctx.inventory, ctx.object_names())
            if missing and ctx.reach is not None and self.cfg.gate1_unseen_by == "tree":
                missing = seen_in_reach(result, missing, ctx.reach())
            if missing and not (argument_of(result) in GENERIC_REFERENTS):
                return out(DROP, "TARGET_NOT_VISIBLE", detail=f"'{result}' names {' '.join(missing)!r}, which is not "
                                                              f"in the room, the inventory or an open container")
        if source in ("swift", "sage") and action_key(result) in {action_key(a) for a in ctx.avoid}:
            return out(DROP, "STAGNATION_AVOID", detail=f"'{result}' is on the stagnation report's list of "
                                                        f"actions to avoid")
        decision = ACCEPT if reason == "VALID" else REPAIR
        detail = REASONS[reason] if decision == ACCEPT else f"{REASONS[reason]}: '{proposed.strip()}' -> '{result}'"
        return out(decision, reason, result, detail, sim)

    def precheck(self, proposed: str, source: str) -> Gate1Decision | None:
        """The checks that do not depend on the state (a DROP, or None): used alone for the Critic's later
        actions, which are checked in full when their turn comes, in the state they will run in."""
        text, _kinds = strip_decorations(proposed)

        def drop(reason: str) -> Gate1Decision:
            return Gate1Decision(source=source, proposed=proposed, decision=DROP, result=None, reason=reason,
                                 normalized=text, detail=REASONS[reason])

        if not text:
            return drop("EMPTY")
        if not verb_of(text) and not text.isdigit():
            return drop("NO_VERB")
        if source == "critic" and is_focus(text):
            return drop("CRITIC_NO_FOCUS")
        return None

    def _admit(self, text: str, kinds: list[str], verb: str, source: str,
               ctx: GateContext) -> tuple[str | None, str, float | None]:
        """(valid action, reason code, similarity) or (None, drop reason, None)."""
        valid_set = set(ctx.valid)
        deco = next((REPAIR_KIND[k] for k in ("prefix", "arrow", "comment", "punctuation", "spacing") if k in kinds),
                    None)
        if text in valid_set:
            return text, deco or "VALID", None
        hit = ctx.by_key().get(action_key(text))
        if hit is not None:
            return hit, deco or ("REPAIR_CASE" if hit.lower() == text.lower() else "REPAIR_SPACING"), None
        norm = normalize(text)
        by_norm = ctx.by_norm()
        if norm in by_norm and same_verb_class(verb_of(by_norm[norm]), verb):
            alias = split_verb(canonical(text))[0] != verb or bool(re.search(r"\b(into|onto)\b", text.lower()))
            return by_norm[norm], ("REPAIR_ALIAS" if alias else "REPAIR_ARTICLES"), None
        if verb in MOVE_VERBS:  # go to X ~ teleport to X (teleportAction is on)
            arg = argument_of(text)
            for other in sorted(MOVE_VERBS - {verb}):
                hit = by_norm.get(f"{other} {arg}")
                if hit is not None:
                    return hit, "REPAIR_ALIAS", None
        if not verb:
            return None, "NO_VERB", None
        named = label_dropped(text, verb, ctx)
        if named is not None:
            return named, "REPAIR_NAME", None
        # the same object as the game's parser would take it (the valid list names it without the qualifier only
        # when no other object shares the name); a focus too: its object does not change
        named_so = {by_norm[w] for w in part_namings(text) if w != norm and w in by_norm
                    and same_verb_class(verb_of(by_norm[w]), verb)}
        if len(named_so) == 1 and stages_shown(text, ctx.look + "\n" + ctx.inventory):
            return named_so.pop(), "REPAIR_WHERE", None
        if verb == "focus on":  # the object of a focus is never changed by a repair
            return None, "NOT_IN_VALID_ACTIONS", None
        same = [v for v in ctx.valid if same_verb_class(verb_of(v), verb) and not self_referential(v)]
        cap = self.cfg.gate1_repair_max_edit
        near = [v for v in same if _edit_distance(normalize(v), norm, cap) <= cap]
        if len({action_key(v) for v in near}) == 1:
            return near[0], "REPAIR_TYPO", None
        same = [v for v in same if names_everything(text, v, ctx.look + "\n" + ctx.inventory)]
        # two-object commands are never repaired by similarity: word overlap cannot tell "pour A into B" from
        # "pour B into A" (seen in a recorded episode before this rule)
        if verb in TWO_OBJECT_VERBS:
            same = []
        if source in ("sage", "critic") and ctx.embedder is not None and same:
            vecs = ctx.embedder.encode(list(same))
            q = ctx.embedder.encode([canonical(text)])[0]
            sims = vecs @ q
            best = int(sims.argmax())
            if float(sims[best]) >= self.cfg.gate1_nearest_min_similarity:
                return same[best], "REPAIR_NEAREST", round(float(sims[best]), 4)
        return None, "NOT_IN_VALID_ACTIONS", None


def label_dropped(text: str, verb: str, ctx: GateContext) -> str | None:
    """ScienceWorld names an object "unknown substance U" in the room text but "unknown substance" in its
    valid-action strings: the proposal with exactly one extra one-letter token, which the room or inventory
    text shows right after the word before it, is that valid action (the same object)."""
    words = canonical(text).split()
    seen = (ctx.look + " " + ctx.inventory).lower()
    for v in ctx.valid:
        if verb_of(v) != verb:
            continue
        vw = canonical(v).split()
        if len(words) != len(vw) + 1:
            continue
        for i, w in enumerate(words):
            if len(w) == 1 and w.isalpha() and i > 0 and words[:i] + words[i + 1:] == vw \
                    and re.search(rf"\b{re.escape(words[i - 1])} {w}\b", seen):
                return v
    return None


def menu_choice(request: str, options: Sequence[str], tried: Sequence[int] = (), task: str = "") -> tuple[int, str]:
    """Gate-1's answer to an ambiguity menu: the option whose words best match the request, preferring
    options not yet tried when the same menu came before (so a loop through the same menu walks through the
    options instead of taking option 0 forever). A `focus on` request is scored against the task description too,
    and when no option is clearly best the menu is cancelled (-1): a wrong focus ends the task, so Gate-1
    never guesses one. Returns (index or -1, why)."""
    focus = is_focus(request)
    want = _words(normalize(request)) | (_words(task) if focus else set())
    scored = sorted((i in tried, -len(want & _words(opt)), i) for i, opt in enumerate(options))
    if focus and len(scored) > 1 and scored[0][:2] == scored[1][:2]:
        return -1, (f"'{request}' is a 'focus on' and no option matches the task better than another: the menu is "
                    f"cancelled rather than guessing a focus target")
    i = scored[0][2]
    why = (f"option {i} ('{options[i]}') shares the most words with '{request}'" if not scored[0][0] else
           f"every option of this menu was tried before; option {i} again")
    if tried and i not in tried:
        why += f"; options {sorted(set(tried))} were already tried when this menu came before"
    return i, why
