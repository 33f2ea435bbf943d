"""Typed construction of the config's nested dataclasses from plain data: unknown keys, bad types and values
outside an enumerated option's choices are errors (a typo must never silently fall back to a default).
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any


def _to_jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_jsonable(v) for v in obj]
    return obj


# Every enumerated option and the values it accepts: a misspelled value is an error naming the field and the allowed
# values, never a silent fall-back to a default (the modules test these strings with ==).
CHOICES: dict[str, tuple[str, ...]] = {
    "swift.quantize": ("int8", "none"),
    "sage.grounding": ("numbered", "free"),
    "sage.choose_reply": ("number", "command"),
    "sage.pick": ("score", "generate"),
    "sage.pick_rule": ("pmi", "mean"),
    "sage.accept": ("best", "margin", "agree"),
    "controller.critical_review": ("off", "unsure", "always"),
    "controller.focus_review": ("choose", "replan"),
    "controller.invalid_rule": ("top1", "ranked"),
    "llm.backend": ("embedded", "openai", "scripted"),
    "amm.importance_mode": ("tag", "llm"),
    "amm.scoring": ("ga", "relevance"),
    "amm.reflection": ("after_episode", "off"),
    "srm.critic_buffer_policy": ("replace", "append"),
    "srm.avoid_binds": ("critic", "all"),
    "srm.focus_limit_counts": ("rewarded", "taken"),
    "srm.gate1_unseen_by": ("tree", "text"),
    "srm.critic_valid_order": ("ranked", "game"),
    "amm.t1_trigger": ("invalid_rule", "top1"),
    "amm.swift_memory_objects": ("in_view", "any"),
}


def _build(cls: type, data: Any, where: str) -> Any:
    """Typed construction of nested dataclasses with clear errors for unknown keys, bad types and values outside an
    enumerated option's choices."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a table/object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(names)}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        kwargs[name] = _coerce(hints[name], value, f"{where}.{name}")
        allowed = CHOICES.get(f"{where}.{name}".removeprefix("config."))
        if allowed is not None and kwargs[name] not in allowed:
            raise ValueError(f"{where.removeprefix('config.')}.{name}".lstrip(".")
                             + f": {kwargs[name]!r} is not one of {', '.join(allowed)}")
    return cls(**kwargs)


def _coerce(tp: Any, value: Any, where: str) -> Any:
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        return tuple(value)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, value, where)
            except ValueError:
                continue
        raise ValueError(f"{where}: {value!r} does not fit {tp}")
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        return value
    return value
