"""Every number the agent honours (docs/AGENT.md) as a named, documented config field, plus the named presets.

A `Config` is loaded from defaults, optionally a JSON/TOML file, then dotted overrides
(`critic.budget=6`). Unknown keys are errors: a typo must never silently fall back to a default.
The presets Baseline, +AMM, +SRM, Full and the sensitivity variants are just flag/number sets;
what the flags *do* is implemented by the modules named in their docs (AMM, SRM land in later issues).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_store.config import MemoryConfig

# The sections and the validation live in their own modules; every name stays importable from here.
from .config_sections import (  # noqa: F401 - re-exported
    DEFAULT_SIMPLIFICATIONS,
    ELECTRICAL_TASKS,
    AMMConfig,
    ControllerConfig,
    EnvConfig,
    EvalConfig,
    LLMConfig,
    SageConfig,
    SRMConfig,
    SwiftConfig,
)
from .config_validation import CHOICES, _build, _coerce, _to_jsonable  # noqa: F401 - re-exported


@dataclass
class Config:
    preset: str = "baseline"
    seed: int = 0
    env: EnvConfig = field(default_factory=EnvConfig)
    swift: SwiftConfig = field(default_factory=SwiftConfig)
    sage: SageConfig = field(default_factory=SageConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    amm: AMMConfig = field(default_factory=AMMConfig)
    srm: SRMConfig = field(default_factory=SRMConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def to_dict(self) -> dict[str, Any]:
        return _to_jsonable(dataclasses.asdict(self))

    def to_record(self) -> dict[str, Any]:
        """What a trace or an evaluation file keeps: everything but secrets (the API key is blanked; a config read
        back from a record takes the key from the environment again)."""
        d = self.to_dict()
        d["llm"]["api_key"] = ""
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Config":
        return _build(cls, data, "config")


# name -> (one-line description, overrides applied on top of the defaults)
_SRM_RUNS = ("Gate-1 checks every action before it runs, the stagnation detector watches every step, the Critic "
             "(at most {budget} LLM calls per episode) answers its reports; Swift's loop guard runs only with Sage off")
_AMM_RUNS = ("the agent writes salient steps (success / near-miss / avoidance) to its episodic memory, starting "
             "from the shipped warm store, and retrieves them when Swift's action is invalid (T1: Swift retries "
             "with at most 3 records) and when Sage plans (T4: at most 5 records as hints)")
PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "baseline": ("SwiftSage: Swift acts, Sage (the LLM) plans when a switching rule fires. No Gate-1, no "
                 "stagnation detector, no Critic, no loop guard, no memory.", {}),
    "amm": (f"+AMM: SwiftSage plus adaptive episodic memory: {_AMM_RUNS}. Stagnation (T2) and repeated invalid "
            f"actions (T3) retrieve and log only.", {"amm.enabled": True}),
    "srm": ("+SRM: SwiftSage plus self-reflection: " + _SRM_RUNS.format(budget=3) + ".", {"srm.enabled": True}),
    "full": (f"Full: +AMM and +SRM together: {_SRM_RUNS.format(budget=3)}; {_AMM_RUNS}; the Critic also sees "
             f"memory evidence (T2 / T3 records).", {"amm.enabled": True, "srm.enabled": True}),
    "full-critic6": (
        "Sensitivity: Full with a Critic budget of 6 calls per episode.",
        {"amm.enabled": True, "srm.enabled": True, "srm.critic_budget": 6},
    ),
    "full-weak-memory": (
        "Sensitivity: Full with weak memory: the store starts empty (no warm-up), so only this run's own "
        "memories can be retrieved.",
        {"amm.enabled": True, "srm.enabled": True, "amm.warmup": False},
    ),
    # LLM-free: what each mechanism that needs no model adds to Swift alone, measured paired against "swift"
    "swift": ("Swift alone: no Sage and no LLM call (controller.sage_enabled off); every action, a focus included, is "
              "Swift's own. The reference for the LLM-free mechanisms.", {"controller.sage_enabled": False}),
    "swift-gate1": ("Swift + Gate-1: every action is checked (not valid, no-op, target unseen) and a dropped one gives "
                    "way to Swift's next-ranked action; the stagnation detector runs but, with no Critic, changes "
                    "nothing. No LLM.", {"controller.sage_enabled": False, "srm.enabled": True,
                                         "srm.critic_enabled": False, "srm.loop_guard": False}),
    "swift-srm": ("Swift + Gate-1 + Swift's loop guard: SRM without its Critic. No LLM.",
                  {"controller.sage_enabled": False, "srm.enabled": True, "srm.critic_enabled": False}),
    "swift-amm": ("Swift + episodic memory: salient steps are written, and when Swift rates no valid action (the "
                  "invalid rule) T1 retries it with at most 3 records that worked. No LLM.",
                  {"controller.sage_enabled": False, "amm.enabled": True}),
    "full-no-swift-t1": (
        "Sensitivity: Full without memory injection into Swift: on T1 the records are retrieved and logged, "
        "but Swift is not retried with them.",
        {"amm.enabled": True, "srm.enabled": True, "amm.swift_injection": False},
    ),
}


def preset(name: str) -> Config:
    """The named preset's config."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    cfg = apply_overrides(Config(), PRESETS[name][1])
    cfg.preset = name
    return cfg


def load_config(path: str | Path | None = None, preset_name: str = "baseline",
                overrides: dict[str, Any] | list[str] | None = None) -> Config:
    """Preset defaults, then a JSON or TOML file (nested tables), then dotted overrides."""
    cfg = preset(preset_name)
    if path is not None:
        p = Path(path)
        text = p.read_text()
        data = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
        merged = _deep_merge(cfg.to_dict(), data)
        cfg = Config.from_dict(merged)
    if overrides:
        cfg = apply_overrides(cfg, overrides)
    return cfg


SECRET_OVERRIDES = ("llm.api_key",)


def redact_overrides(overrides: list[str]) -> list[str]:
    """`section.field=value` overrides as they may be written down: secrets blanked."""
    return [f"{o.split('=', 1)[0]}=<redacted>" if o.split("=", 1)[0].strip() in SECRET_OVERRIDES else o
            for o in overrides]


def apply_overrides(cfg: Config, overrides: dict[str, Any] | list[str]) -> Config:
    """`{"srm.critic_budget": 6}` or `["srm.critic_budget=6"]`; values in a list are parsed as JSON."""
    if isinstance(overrides, list):
        parsed: dict[str, Any] = {}
        for item in overrides:
            if "=" not in item:
                raise ValueError(f"override {item!r} must look like section.field=value")
            key, raw = item.split("=", 1)
            try:
                parsed[key.strip()] = json.loads(raw)
            except json.JSONDecodeError:
                parsed[key.strip()] = raw
        overrides = parsed
    data = cfg.to_dict()
    for dotted, value in overrides.items():
        node = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            if part not in node or not isinstance(node[part], dict):
                raise ValueError(f"unknown config section {part!r} in {dotted!r}")
            node = node[part]
        if parts[-1] not in node:
            raise ValueError(f"unknown config field {dotted!r}")
        node[parts[-1]] = value
    return Config.from_dict(data)


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out
