"""The one normalisation of action text, used everywhere actions are compared (DESIGN.md).

Swift's WordPiece tokenizer is uncased, LLMs write "Action 3: Open the door --> the door opens", and the
game's own strings mix cases ("focus on unknown substance B"). Every comparison of two action texts in
this project (the controller's invalid trigger, Sage's mapping, Gate-1, the stagnation detector, Swift's
valid ranking and training checks) goes through `action_key`; every parse of a verb goes through
`verb_of`. Nothing else lower-cases or splits action text for comparison.
"""
from __future__ import annotations

import re

# ScienceWorld's action templates by their verb (`getPossibleActions()`), longest first so that
# "look around" wins over "look", "wait1" over "wait".
VERBS: tuple[str, ...] = tuple(sorted((
    "look around", "look at", "look in", "pick up", "put down", "focus on", "teleport to", "go to", "move", "pour",
    "dunk", "mix", "use", "open", "close", "activate", "deactivate", "connect", "disconnect", "eat", "flush",
    "read", "wait1", "wait", "inventory", "task", "reset task",
), key=len, reverse=True))
MOVE_VERBS: frozenset[str] = frozenset({"go to", "teleport to"})
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


def action_key(action: str) -> str:
    """What two spellings of one action share: case and all whitespace dropped (WordPiece decoding loses both)."""
    return "".join((action or "").lower().split())


def canonical(action: str) -> str:
    """Lower case, single spaces, no surrounding punctuation: the form actions are shown and stored in."""
    return " ".join((action or "").lower().split()).strip(" .,;:!\"'`*")


def strip_decorations(text: str) -> tuple[str, list[str]]:
    """Remove what LLMs wrap around a command; returns (command, kinds removed).

    kinds: "prefix" (a leading "Action 3:" / "1." / "- "), "arrow" (a trailing "--> expected observation"),
    "punctuation" (quotes, backticks, a trailing period), "spacing" (runs of whitespace)."""
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
    single = " ".join(s.split())
    if single != s:
        kinds.append("spacing")
    return single, kinds


def split_verb(s: str) -> tuple[str, str]:
    """(the verb as written, its template verb) of a canonical action; real verbs win over aliases
    ("put down" is a verb, "put" an alias of "move")."""
    for v in VERBS:
        if s == v or s.startswith(v + " "):
            return v, v
    for alias in sorted(VERB_ALIASES, key=len, reverse=True):
        if s == alias or s.startswith(alias + " "):
            return alias, VERB_ALIASES[alias]
    return "", ""


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


_SELF_REF = re.compile(r"^(?:use|move|pour|dunk|connect)\s+(.+?)\s+(?:on|to|in|into)\s+(.+)$")


def self_referential(action: str) -> bool:
    """`use axe on axe`, `pour fire pit into fire pit`: a valid string of the game that does nothing sensible;
    never a target for mapping or repair."""
    m = _SELF_REF.match(canonical(action))
    return bool(m) and m.group(1) == m.group(2)
