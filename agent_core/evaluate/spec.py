"""What an evaluation is: presets x tasks x test variations under one set of settings, and where its
files live. Everything here is checked before any JVM starts.

Layout of an evaluation directory:

    evaluation.json                      the settings and the episodes asked for (written first)
    traces/<preset>/<task>-v<N>-<preset>.jsonl   one normal trace per episode (the Run page opens it)
    results.json, report.md              written by `python -m agent_core.evaluate` from the traces
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config import PRESETS, Config, EnvConfig, EvalConfig, load_config, redact_overrides
from ..env import catalog

SPEC_FILE = "evaluation.json"
TRACES = "traces"
# the paper's four configurations (docs/AGENT.md §8); the sensitivity variants are opt-in
DEFAULT_PRESETS = ("baseline", "amm", "srm", "full")


class EvalError(ValueError):
    """Bad input for an evaluation: raised before any JVM starts."""


@dataclass(frozen=True)
class Job:
    preset: str
    task: str
    variation: int

    @property
    def key(self) -> str:
        return f"{self.preset}/{self.task}-v{self.variation}"

    @property
    def run_id(self) -> str:
        return f"{self.task}-v{self.variation}-{self.preset}"


@dataclass
class EvalSpec:
    """The settings every episode of one evaluation shares. Two runs into one directory must agree on
    these (they may ask for different episodes: the directory holds the union)."""

    presets: list[str] = field(default_factory=lambda: list(DEFAULT_PRESETS))
    tasks: list[str] = field(default_factory=list)  # names; empty = all 30
    # the first N test variations of each task (fewer where a task has fewer): the protocol's 10
    # (docs/AGENT.md §8), from EvalConfig
    variations: int = field(default_factory=lambda: EvalConfig().variations_per_task)
    variation_list: list[int] = field(default_factory=list)  # explicit test variations instead of the first N
    split: str = field(default_factory=lambda: EvalConfig().split)
    step_limit: int = field(default_factory=lambda: EnvConfig().step_limit)
    overrides: list[str] = field(default_factory=list)  # section.field=value, applied to every preset
    config_file: str | None = None
    fresh_jvm: bool = True  # a new JVM per episode: an episode never depends on what the JVM played before

    def settings(self) -> dict[str, Any]:
        """What must match for two runs to share a directory."""
        return {"split": self.split, "step_limit": self.step_limit, "overrides": sorted(redact_overrides(self.overrides)),
                "config_file": self.config_file, "fresh_jvm": self.fresh_jvm}

    def config(self, preset_name: str) -> Config:
        cfg = load_config(self.config_file, preset_name, list(self.overrides) + [f"env.step_limit={self.step_limit}"])
        cfg.env.fresh_jvm = self.fresh_jvm
        if cfg.amm.enabled:
            # each episode plays on its own fresh copy of the preset's starting store (set per episode by the
            # runner), so episodes are independent and may run in any order on any worker; a reflection at the
            # end of an episode would only be thrown away with that copy
            cfg.amm.reflection = "off"
        return cfg

    def jobs(self) -> list[Job]:
        """Every episode, validated: unknown presets, tasks and variations outside the split are errors."""
        unknown = [p for p in self.presets if p not in PRESETS]
        if unknown:
            raise EvalError(f"unknown preset(s) {', '.join(map(repr, unknown))}; choose from: {', '.join(PRESETS)}")
        if not self.presets:
            raise EvalError("no presets to evaluate")
        if self.step_limit < 1:
            raise EvalError(f"step limit {self.step_limit} must be at least 1")
        cat = catalog()
        try:
            tasks = [cat.get(t) for t in self.tasks] if self.tasks else list(cat.tasks)
        except (KeyError, ValueError) as e:
            raise EvalError(str(e).strip('"')) from None
        out: list[Job] = []
        for t in tasks:  # task-major: a partial evaluation has every preset on the same episodes
            allowed = t.variations(self.split)
            if self.variation_list:
                for v in self.variation_list:
                    try:
                        cat.check_variation(t.name, v, self.split)
                    except ValueError as e:
                        raise EvalError(str(e)) from None
                vs = list(self.variation_list)
            else:
                if self.variations < 1:
                    raise EvalError(f"--variations {self.variations}: ask for at least 1")
                vs = allowed[: self.variations]
            out += [Job(p, t.name, v) for v in vs for p in self.presets]
        for p in self.presets:  # a bad override or config file is an error now, not in a worker
            try:
                self.config(p)
            except (ValueError, FileNotFoundError) as e:
                raise EvalError(f"config for preset {p!r}: {e}") from None
        return out

    def to_json(self) -> dict[str, Any]:
        """In memory, for the workers (secrets included)."""
        return asdict(self)

    def public_json(self) -> dict[str, Any]:
        """What is written to disk: secrets blanked."""
        return {**asdict(self), "overrides": redact_overrides(self.overrides)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "EvalSpec":
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


def trace_path(out: Path, job: Job) -> Path:
    return Path(out) / TRACES / job.preset / f"{job.run_id}.jsonl"


def prepare_dir(out: Path, spec: EvalSpec, jobs: list[Job]) -> dict[str, Any]:
    """Create or reuse an evaluation directory. Refuses a directory that holds another evaluation (other
    settings) or files that are not an evaluation's. Returns the directory's record (settings + all jobs)."""
    out = Path(out)
    spec_file = out / SPEC_FILE
    keys = [j.key for j in jobs]
    if spec_file.exists():
        try:
            old = json.loads(spec_file.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise EvalError(f"{spec_file} is unreadable ({e}); choose another output directory") from None
        if old.get("settings") != spec.settings():
            diff = {k: (old.get("settings", {}).get(k), v) for k, v in spec.settings().items()
                    if old.get("settings", {}).get(k) != v}
            raise EvalError(f"{out} holds another evaluation's results (different settings: " +
                            "; ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in diff.items()) +
                            "); choose another --out directory")
        record = old
        record["jobs"] = list(dict.fromkeys(list(old.get("jobs", [])) + keys))
        record["spec"] = spec.public_json()
    else:
        if out.exists() and any(out.iterdir()):
            raise EvalError(f"{out} is not empty and holds no {SPEC_FILE}: it is not an evaluation directory; "
                            f"choose a new or empty --out directory")
        record = {"settings": spec.settings(), "spec": spec.public_json(), "jobs": keys}
    out.mkdir(parents=True, exist_ok=True)
    tmp = spec_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(spec_file)
    return record


def job_from_key(key: str) -> Job:
    preset_name, rest = key.split("/", 1)
    task, var = rest.rsplit("-v", 1)
    return Job(preset_name, task, int(var))
