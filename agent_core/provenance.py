"""Which code and settings made a trace or an evaluation, and one seed for every random source.

Every trace header and every evaluation's results.json records `code_revision()` and `config_hash(cfg)`, so a
page can say what made an episode, Compare can warn when two episodes differ in more than their preset, and a
resume can tell that the code changed under it.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# files whose changes do not change the agent: what the app writes at run time, docs and tests
_NOT_CODE = ("runs/", "evals/", "docs/", "tests/", "benchmarks/results/", "README.md", ".streamlit/")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10,
                          check=True).stdout


@functools.lru_cache(maxsize=1)
def code_revision() -> dict[str, Any]:
    """{"commit": full hash, "modified": tracked code files differ from it, "diff": a hash of those differences,
    "source": "git"}; outside a git
    checkout, SWIFTSAGE_CODE_REVISION (a commit set by whoever installed the copy) or "unknown"."""
    try:
        commit = _git("rev-parse", "HEAD").strip()
        changed = [line[3:] for line in _git("status", "--porcelain", "--untracked-files=no").splitlines()]
        code = [p for p in changed if not p.startswith(_NOT_CODE)]
        out: dict[str, Any] = {"commit": commit, "modified": bool(code), "source": "git"}
        if code:  # which uncommitted changes: two runs of the same edited tree are still comparable
            diff = _git("diff", "HEAD", "--", *code)
            out["diff"] = hashlib.sha256(diff.encode()).hexdigest()[:12]
        return out
    except (OSError, subprocess.SubprocessError):
        env = os.environ.get("SWIFTSAGE_CODE_REVISION", "")
        return {"commit": env, "modified": False, "source": "environment" if env else "unknown"}


@functools.lru_cache(maxsize=1)
def machine() -> dict[str, Any]:
    """{"cpu": model name, "isa": the widest vector instructions the CPU offers, "cores"}. torch's and
    llama.cpp's kernels round differently on AVX-512 and AVX2, so the same code, settings and seed can rank another
    action first on another machine: a paired comparison should pair episodes played on one kind of machine."""
    import platform

    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and cpu in ("", platform.machine(), platform.processor()):
                cpu = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    if "avx512f" in flags:
        isa = "avx512" + ("+bf16" if "avx512_bf16" in flags or "amx_bf16" in flags else "")
    else:
        isa = next((x for x in ("avx2", "avx", "sse4_2") if x in flags), "unknown" if not flags else "other")
    return {"cpu": cpu, "isa": isa, "cores": os.cpu_count() or 0}


def same_machine_kind(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two recorded machines that round alike: the same CPU model and vector instructions (the core count aside:
    Swift's numbers are the same on 1 and 2 threads)."""
    return (a.get("cpu"), a.get("isa")) == (b.get("cpu"), b.get("isa"))


def describe_machine(m: dict[str, Any]) -> str:
    """'AMD EPYC (avx2, 2 cores)', or that the trace predates the record."""
    if not m:
        return "not recorded"
    return f"{m.get('cpu') or 'unknown CPU'} ({m.get('isa', '?')}, {m.get('cores', '?')} cores)"


def config_hash(record: dict[str, Any]) -> str:
    """A short, stable hash of an effective config (its `to_record()` form: the API key is already blank)."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_code(code: dict[str, Any], run_id: str = "") -> str:
    """One line for a page: 'a1b2c3d4e5' or 'a1b2c3d4e5 + uncommitted changes', or why it is not known (a shipped
    trace from before revisions were kept is labelled with the commit that shipped it: assets/PROVENANCE.json)."""
    if not code:
        label = shipped_labels().get(run_id) if run_id else None
        if label:
            return f"not recorded; shipped in {label['committed_in'][:10]} ({label['date']}), recorded by that code or older"
        return "not recorded (a trace from before revisions were kept)"
    if not code.get("commit"):
        return "unknown (not a git checkout)"
    return code["commit"][:10] + (" + uncommitted changes" if code.get("modified") else "")


@functools.lru_cache(maxsize=1)
def shipped_labels() -> dict[str, dict[str, str]]:
    """run id -> {"file", "committed_in", "date"} for the shipped traces that do not record their code
    (scripts/label_shipped.py writes it)."""
    try:
        return json.loads((ROOT / "assets" / "PROVENANCE.json").read_text())
    except (OSError, ValueError):
        return {}


def seed_everything(seed: int) -> None:
    """`Config.seed` for Python's, NumPy's and torch's generators (the LLM backends take it as an argument)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover - numpy is a requirement
        pass
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover
        pass
