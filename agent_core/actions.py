"""The one normalisation of action text, used everywhere actions are compared (docs/AGENT.md §9).

Swift's WordPiece tokenizer is uncased, LLMs write "Action 3: Open the door --> the door opens", and the
game's own strings mix cases ("focus on unknown substance B"). Every comparison of two action texts in
this project (the controller's invalid trigger, Sage's mapping, Gate-1, the stagnation detector, Swift's
valid ranking and training checks) goes through `action_key`; every parse of a verb goes through
`verb_of`. Nothing else lower-cases or splits action text for comparison.
"""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Mapping, Sequence

# ScienceWorld's action templates by their verb (`getPossibleActions()`), longest first so that
# "look around" wins over "look", "wait1" over "wait".
VERBS: tuple[str, ...] = tuple(sorted((
    "look around", "look at", "look in", "pick up", "put down", "focus on", "teleport to", "go to", "move", "pour",
    "dunk", "mix", "use", "open", "close", "activate", "deactivate", "connect", "disconnect", "eat", "flush",
    "read", "wait1", "wait", "inventory", "task", "reset task",
), key=len, reverse=True))
MOVE_VERBS: frozenset[str] = frozenset({"go to", "teleport to"})
# ScienceWorld's ten locations
ROOMS: tuple[str, ...] = ("art studio", "bathroom", "bedroom", "foundry", "greenhouse", "hallway", "kitchen",
                          "living room", "outside", "workshop")
# Aliases that name the same template: normalising them never changes what the command does.
VERB_ALIASES: dict[str, str] = {
    "walk to": "go to", "take": "pick up", "grab": "pick up", "get": "pick up", "drop": "put down",
    "examine": "look at", "inspect": "look at", "turn on": "activate", "switch on": "activate",
    "turn off": "deactivate", "switch off": "deactivate", "place": "move", "put": "move",
}
ARTICLES = re.compile(r"\b(the|a|an|some)\b\s*")
_PREFIX = re.compile(r"^\s*(?:action|step|command)\s*\d*\s*[:.)-]\s*", re.I)
_NUMBERING = re.compile(r"^\s*(?:[-*•>]+|\d+\s*[.):])\s*")
_ARROW = re.compile(r"\s*-+>.*$", re.S)
_COMMENT = re.compile(r"^\s*\([^()]*\)\s*|\s*\([^()]*\)\s*$")
# words that name no particular object: leaving them out of a repaired action loses nothing
GENERIC_WORDS = frozenset({"door", "room", "area", "thing", "object", "the", "a", "an", "some", "of", "to", "in",
                           "on", "into", "onto", "with", "from", "at"})


def action_key(action: str) -> str:
    """What two spellings of one action share: case and all whitespace dropped (WordPiece decoding loses both)."""
    return "".join((action or "").lower().split())


def canonical(action: str) -> str:
    """Lower case, single spaces, no surrounding punctuation: the form actions are shown and stored in."""
    return " ".join((action or "").lower().split()).strip(" .,;:!\"'`*")


def strip_decorations(text: str) -> tuple[str, list[str]]:
    """Remove what LLMs wrap around a command; returns (command, kinds removed).

    kinds: "prefix" (a leading "Action 3:" / "1." / "- "), "arrow" (a trailing "--> expected observation"),
    "punctuation" (quotes, backticks, a trailing period), "comment" (a parenthesised remark before or after),
    "spacing" (runs of whitespace)."""
    kinds: list[str] = []
    s = text or ""
    cut = _ARROW.sub("", s)
    if cut != s:
        kinds.append("arrow")
        s = cut
    for pat in (_PREFIX, _NUMBERING):
        cut = pat.sub("", s, count=1)
        if cut != s:
            if "prefix" not in kinds:
                kinds.append("prefix")
            s = cut
    stripped = s.strip().strip("\"'`*").strip().rstrip(".!;,").strip()
    if stripped != s.strip():
        kinds.append("punctuation")
    s = stripped
    # "(reward +0)", "(to get water)": a comment in parentheses before or after the command
    cut = _COMMENT.sub("", s).strip()
    if cut != s and cut:
        kinds.append("comment")
        s = cut.strip("\"'`*").strip()
    single = " ".join(s.split())
    if single != s:
        kinds.append("spacing")
    return single, kinds


_ALIASES_LONGEST_FIRST = tuple(sorted(VERB_ALIASES, key=len, reverse=True))


# split_verb and verb_of are asked about the same few hundred valid actions at every step (Swift's focus check,
# Gate-1, Sage's list): cached, a step spends ~0.1 ms on them instead of ~3 ms
@lru_cache(maxsize=1 << 16)
def split_verb(s: str) -> tuple[str, str]:
    """(the verb as written, its template verb) of a canonical action; real verbs win over aliases
    ("put down" is a verb, "put" an alias of "move")."""
    for v in VERBS:
        if s == v or s.startswith(v + " "):
            return v, v
    for alias in _ALIASES_LONGEST_FIRST:
        if s == alias or s.startswith(alias + " "):
            return alias, VERB_ALIASES[alias]
    return "", ""


@lru_cache(maxsize=1 << 16)
def verb_of(action: str) -> str:
    """The template verb of an action ("pick up", "focus on", ...), aliases resolved; "" when none fits."""
    return split_verb(canonical(action))[1]


def same_verb_class(a: str, b: str) -> bool:
    """Do two verbs name the same command? `go to` and `teleport to` are one (teleportAction is on)."""
    if a in MOVE_VERBS and b in MOVE_VERBS:
        return True
    return a == b and a != ""


def argument_of(action: str) -> str:
    """What follows the verb ("focus on the red paint" -> "red paint"), articles dropped."""
    s = canonical(action)
    written, _verb = split_verb(s)
    return " ".join(ARTICLES.sub("", s[len(written):]).split())


def is_focus(action: str) -> bool:
    return verb_of(action) == "focus on"


def is_move(action: str) -> bool:
    return verb_of(action) in MOVE_VERBS


_PREPOSITIONS = ((r"\binto\b", "in"), (r"\bonto\b", "on"))


def normalize(action: str) -> str:
    """The matching form: canonical, alias verbs rewritten to their template verb ("turn on" -> "activate",
    "put X in Y" -> "move X to Y", "walk to" -> "go to"), "into"/"onto" -> "in"/"on", articles dropped.
    Two actions with the same normal form are the same command."""
    s = canonical(strip_decorations(action)[0])
    for pat, rep in _PREPOSITIONS:
        s = re.sub(pat, rep, s)
    written, verb = split_verb(s)
    if written and written != verb:
        rest = s[len(written):]
        if written == "put":  # "put X in/on Y" is "move X to Y"
            rest = re.sub(r" (?:in|on) ", " to ", rest, count=1)
        s = verb + rest
    return " ".join(ARTICLES.sub("", s).split())


# what the game's parser takes in an object's name and its valid-action names leave out when the object is the only
# one of its name in view: where it is ("thermometer in inventory") and a life stage ("apple tree in the adult stage")
_WHERE = re.compile(r"\s+in\s+(?:inventory|(?:the\s+)?[a-z]+\s+stage)\b")


def unlocated(action: str) -> str:
    """`normalize(action)` without the 'in inventory' and life-stage qualifiers of its objects: `use thermometer in
    inventory on substance in metal pot` -> `use thermometer on substance in metal pot` (gold paths name objects so;
    the valid-action list does not, when one name is enough)."""
    return " ".join(_WHERE.sub("", normalize(action)).split())


_STAGED = re.compile(r"([a-z0-9]+) in (?:the )?([a-z]+) stage(?: in ([a-z0-9 ]+?))?(?= to | on | in |$)")


def stages_shown(action: str, context: str) -> bool:
    """Does the room or inventory text show each life stage the action names, for that object and (when it names
    one) in that place? `apple tree in the reproducing stage in self watering flower pot 9` holds only when a line
    of `context` has both `tree in the reproducing stage` and `self watering flower pot 9`. Dropping a stage that
    is not so (a path remembered from another variation, whose pot 9 held another stage) would pick another
    object, and a wrong focus ends the task."""
    lines = [" ".join(line.lower().split()) for line in context.splitlines()]
    for m in _STAGED.finditer(normalize(action)):
        obj, stage, place = m.groups()
        if not any(f"{obj} in the {stage} stage" in line and (not place or place in line) for line in lines):
            return False
    return True


_PART = re.compile(r"^(.+?)\s+(anode|cathode|terminal \d+)$")


def part_namings(action: str) -> list[str]:
    """The other ways the game names an electrical part in `connect A to B`: gold paths write `battery anode` and
    `aluminum foil terminal 2`, the valid-action list `anode in battery` (and keeps `black wire terminal 2`).
    Every combination of the two ends, the action's own first; just the action for any other verb."""
    norm = unlocated(action)
    if verb_of(norm) != "connect":
        return [norm]
    ends = argument_of(norm).split(" to ")
    if len(ends) != 2:
        return [norm]
    ways = []
    for end in ends:
        m = _PART.match(end)
        ways.append([end] + ([f"{m.group(2)} in {m.group(1)}"] if m else []))
    return [f"connect {a} to {b}" for a in ways[0] for b in ways[1]]


_SELF_REF = re.compile(r"^(?:use|move|pour|dunk|connect)\s+(.+?)\s+(?:on|to|in|into)\s+(.+)$")


def treats_room_as_object(action: str) -> bool:
    """`pour cup into kitchen`, `mix kitchen`, `focus on greenhouse`: the game lists a room as an object of
    most commands; only moving there, its doors and looking around it make sense."""
    verb = verb_of(action)
    if verb in MOVE_VERBS or verb in ("look around", ""):
        return False
    words = f" {canonical(action)} "
    return any(f" {r} " in words and f"door to {r}" not in words for r in ROOMS)


# what the game lets you focus on but no task ever asks for
NEVER_FOCUS: frozenset[str] = frozenset({"agent", "inventory", "air", "door", "ground", "floor", "wall", "ceiling"})


def never_a_focus_target(action: str) -> bool:
    """`focus on inventory`, `focus on air`, `focus on door to kitchen`, `focus on kitchen`: targets the game
    lists for every room that no ScienceWorld task asks to focus on. The object is judged before its location:
    `focus on egg turtle in outside` names a turtle (a gold focus), not the room."""
    arg = argument_of(canonical(action))
    obj = re.split(r"\s+in\s+", arg)[0]
    return obj in ROOMS or obj in NEVER_FOCUS or obj.startswith("door")


def self_referential(action: str) -> bool:
    """`use axe on axe`, `pour fire pit into fire pit`: a valid string of the game that does nothing sensible;
    never a target for mapping or repair."""
    m = _SELF_REF.match(canonical(action))
    return bool(m) and m.group(1) == m.group(2)


# words of an action's argument that say where or how, never which object
_RELATION_WORDS = frozenset({"in", "on", "of", "to", "into", "onto", "containing", "with", "from", "at", "and",
                             "the", "a", "an", "some"})
# objects every room has, and parts of objects the room text never lists (electrical terminals: "anode in battery",
# "terminal 1 in black wire"; a sink's drain and sewer), from the game's own action names
ALWAYS_PRESENT = frozenset({"agent", "air", "inventory", "self", "anode", "cathode", "terminal", "component", "drain",
                            "sewer",
                            # the game's category names for an object in scope ("move object to orange box" for the
                            # painting): never in the room text as such
                            "object", "thing", "living", "non", "substance", "organism", "animal"})


def unseen_words(action: str, look: str, inventory: str, located: bool = True) -> list[str]:
    """The words of the objects an action names that are in neither the room text (which lists what is in open
    containers), nor the inventory: ["metal", "pot"] for `pick up metal pot` when the pot is in a closed
    cupboard. Moves, meta commands, room names and numbers are never unseen."""
    verb = verb_of(action)
    if not verb or verb in MOVE_VERBS or verb in ("look around", "inventory", "task", "reset task", "wait", "wait1"):
        return []
    arg = argument_of(action)
    words = re.findall(r"[a-z0-9]+", arg)
    seen = _text_words(look, inventory)
    # the game names an object by where it is when two share a name ("move cloth sittable in inventory to hallway"
    # for the mattress just picked up): in the inventory or in this room, it is in view under whatever name. Only
    # for the game's own action names of this state (`located`): an action remembered from another episode says
    # where its object was then
    here = re.search(r"this room is called the ([a-z ]+?)\.", look.lower())
    places = ("inventory",) + ((here.group(1).strip(),) if here else ())
    for part in re.split(r"\s+(?:to|into|onto|on|and|with)\s+", arg) if located else ():
        if any(part.endswith(f" in {p}") for p in places):
            seen |= set(re.findall(r"[a-z0-9]+", part))
    return [w for w in dict.fromkeys(words) if w not in _RELATION_WORDS and w not in _ROOM_WORDS and not w.isdigit()
            and w not in ALWAYS_PRESENT and w not in seen]


_ROOM_WORDS = frozenset(w for r in ROOMS for w in r.split())


@lru_cache(maxsize=16)
def _text_words(look: str, inventory: str) -> frozenset[str]:
    """The words of a state's room and inventory text (Gate-1 asks once per valid action in a step)."""
    return frozenset(re.findall(r"[a-z0-9]+", f"{look}\n{inventory}".lower()))


def _name_words(name: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", name.lower()))


_names_index_last: tuple | None = None


def _names_index(names: Mapping[str, Sequence[str]]) -> tuple[list[tuple[str, list[str]]], Counter,
                                                                list[tuple[str, list[str]]], Counter]:
    """The object table's names as words, and how many objects share each; then the same by kind (identical objects,
    those with the same names, as one: five apple seeds in a seed jar): each kind's names as an action writes them
    (articles dropped; one entry per name, the longest first) with its names as the room text writes them, and how
    many kinds share each of those. One table per step (the env caches it), asked once per valid action, so the last
    one is kept (by identity: the table is never changed in place)."""
    global _names_index_last
    last = _names_index_last  # read once: another thread (a Streamlit session) may store its own table meanwhile
    if last is None or last[0] is not names:
        table = [(_name_words(used), [_name_words(x) for x in every]) for used, every in names.items()]
        owners = Counter(n for _used, every in table for n in set(every))
        kinds_seen: dict[frozenset[str], list[str]] = {}
        for used, every in names.items():
            kinds_seen.setdefault(frozenset(every), []).append(used)
        kinds = [(sorted({_name_words(ARTICLES.sub("", x.lower())) for x in (*kind, *used)} - {""}),
                  sorted({_name_words(x) for x in kind} - {""})) for kind, used in kinds_seen.items()]
        kind_owners = Counter(n for _arg, text_names in kinds for n in text_names)
        # every (name as an action writes it, its kind's names as the text writes them), the longest name first
        kinds = sorted(((n, text_names) for arg_names, text_names in kinds for n in arg_names),
                       key=lambda x: -len(x[0]))
        last = _names_index_last = (names, table, owners, kinds, kind_owners)
    return last[1], last[2], last[3], last[4]


# an object as the room text lists it: its name, then the end of its entry ("a apple seed, ...", "a seed jar
# (containing ...)", "a mattress" at the line's end), not a word of a longer name ("a bee hive" shows no bee)
_ENTRY_END = r"(?=\s*(?:$|[,.():;\n])|\s+(?:in|on|containing|which|that|with|is)\b)"


def seen_by_another_name(action: str, missing: Sequence[str], look: str, inventory: str,
                         names: Mapping[str, Sequence[str]], by_kind: bool = True) -> list[str]:
    """`missing` (from `unseen_words`) less the words of an object the action names by a name the room text does not
    use, when the text shows the object under another of its names: the game's `cloth sittable` is the mattress the
    room lists as "a mattress". `names`: the name an action uses -> every name of that object (the game's object
    table, `ScienceWorld.object_names`; not to be changed after the call: its words are kept for the next one). The
    other name must appear as an object in the text ("a mattress", "the mattress"), not only as a word of another
    object's name ("a flower pot" does not show a metal pot's "pot"), and must be that object's alone: "substance",
    the game's name for milk in a closed fridge and for the air every room shows, shows neither. `by_kind`: also
    the names of identical objects, as a kind (below; False: the earlier rule, for benchmarks/unseen_valid.py)."""
    if not missing:
        return list(missing)
    # a name several objects share says nothing about which one is in view: the game calls every substance
    # "substance" (and the room text always shows "a substance called air"), many things "container", "plant"
    table, owners, kinds, kind_owners = _names_index(names)
    arg = " " + _name_words(argument_of(action)) + " "
    text = f"{look}\n{inventory}".lower()
    covered: set[str] = set()
    for used_words, every in table:
        if not used_words or f" {used_words} " not in arg:
            continue
        for other in every:
            if (other and other != used_words and owners[other] == 1 and other not in ALWAYS_PRESENT
                    and re.search(rf"\b(?:a|an|the|some)\s+{re.escape(other)}\b", text)):
                covered |= set(used_words.split())
                break
    if by_kind and any(w not in covered for w in missing):
        # the valid-action list names identical objects by any of their names joined to one of their container's
        # (`apple seed in the seed stage on cup containing apple seed` for a seed the text lists in "a seed jar
        # (containing a apple seed, a apple seed)"), and their action names change from one call to the next: any
        # name of a kind the text lists under a name no other kind has is in view. Longest names first, each part
        # of the action once (the index keeps them in that order)
        rest = arg
        for name, text_names in kinds:
            if f" {name} " in rest and any(
                    kind_owners[t] == 1 and t not in ALWAYS_PRESENT
                    and re.search(rf"\b(?:a|an|the|some)\s+{re.escape(t)}{_ENTRY_END}", text, re.M)
                    for t in text_names):
                covered |= set(name.split())
                rest = rest.replace(f" {name} ", " | ")
    return [w for w in missing if w not in covered]


def seen_in_reach(action: str, missing: Sequence[str], reach: Mapping[str, bool]) -> list[str]:
    """`missing` less the words of an object the action names (by the name its actions use) that the game's object
    tree puts within the agent's reach (`ScienceWorld.reach`: in the room, the inventory, or on or in open things at
    any depth). The room text lists contents only so deep: a block on an inclined plane standing on another plane is
    missing from it, yet the game takes `move block to inclined plane b`. An object the tree puts in a closed
    container, or does not know, keeps its words missing."""
    if not missing:
        return list(missing)
    arg = " " + _name_words(argument_of(action)) + " "
    covered: set[str] = set()
    for name in sorted(reach, key=len, reverse=True):  # the longest name first, each part of the action once
        words = _name_words(ARTICLES.sub("", name.lower()))  # as `argument_of` writes it: "apple seed in seed stage"
        if words and f" {words} " in arg:
            if reach[name]:
                covered |= set(words.split())
            arg = arg.replace(f" {words} ", " | ", 1)
    return [w for w in missing if w not in covered]


def names_everything(proposed: str, candidate: str, context: str = "") -> bool:
    """Does `candidate` name every object word of `proposed`? A mapping may add detail ("cup" -> "cup
    containing red paint") but never swap or lose an object ("glass cup" -> "cup containing red paint" when
    the red paint is in the wood cup; "in bowl" -> "into art studio"). Generic words ("door", "the", "in") do
    not count, and neither does a word of the room's own description of the candidate's object: the game's
    action names leave out materials ("pick up wood cup" -> "pick up cup containing yellow paint" when the
    room shows "a wood cup (containing yellow paint)")."""
    want = set(re.findall(r"[a-z0-9]+", argument_of(normalize(proposed)))) - GENERIC_WORDS
    have = set(re.findall(r"[a-z0-9]+", canonical(candidate)))
    missing = want - have
    if not missing:
        return True
    # the room's description of the candidate's object: the clause sharing the most words with it
    best, best_n = set(), 0
    for clause in re.split(r"[\n.,:;]", (context or "").lower()):
        words = set(re.findall(r"[a-z0-9]+", clause))
        n = len(words & (have - GENERIC_WORDS))
        if n > best_n:
            best, best_n = words, n
    return best_n > 0 and missing <= best


def changes_command(raw: str, mapped: str) -> bool:
    """Would running `mapped` for `raw` change the command: another verb, or another object of a `focus on`?
    (The audit of mappings and repairs in recorded traces; Gate-1 and map_action never do either.)"""
    raw_verb, new_verb = verb_of(strip_decorations(raw)[0]), verb_of(mapped)
    if not same_verb_class(raw_verb, new_verb):
        return True
    return raw_verb == "focus on" and argument_of(normalize(raw)) != argument_of(normalize(mapped))
