"""Memory stores a page can open: the latest run's, else a read copy of the shipped warm store. Shared by the
Memory explorer and Ask the agent."""
from __future__ import annotations

import json
import os
from pathlib import Path

import streamlit as st

from memory_store import MemoryConfig
from views import share, sources

ROOT = sources.ROOT


def resolve_store(path: str | Path) -> Path:
    """A store path as a trace records it: relative to the project when the run's store was inside it."""
    p = Path(path)
    return p if p.is_absolute() else ROOT / p


def short_path(path: str) -> str:
    try:
        return str(resolve_store(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def is_store(path: str | Path) -> bool:
    try:
        return (Path(path) / "chroma.sqlite3").exists()
    except (OSError, ValueError):  # a recorded or typed path no file can have (too long, a NUL): not a store
        return False


def latest_run_store() -> tuple[str, str] | None:
    """(store, trace) of the newest trace under the runs folder whose run used memory and whose store exists."""
    runs = sources.runs_dir()
    if not runs.is_dir():
        return None
    for trace in sorted(runs.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)[:200]:
        try:
            with open(trace, encoding="utf-8") as fh:
                header = json.loads(fh.readline())
        except (OSError, ValueError):
            continue
        store = header.get("memory_store") if isinstance(header, dict) else None
        if store and share.may_open(store) and is_store(store):  # a shared app skips stores outside its folders
            return store, str(trace)
    return None


@st.cache_resource(show_spinner="Preparing a read copy of the shipped warm store...")
def shipped_store() -> str:
    """A copy of the shipped warm store to look at (the seed the agent copies is never opened here)."""
    from agent_core.amm.store import prepare_store

    path, _ = prepare_store(sources.runs_dir() / "memory" / "shipped-warm", True, MemoryConfig())
    return str(path)


def default_store() -> tuple[str, str]:
    """(directory, why it is the default)."""
    found = latest_run_store()
    if found:
        return found[0], f"the store of the latest run that used memory ({short_path(found[1])})"
    if os.environ.get("SWIFTSAGE_MEMORY_DIR"):
        return os.environ["SWIFTSAGE_MEMORY_DIR"], "SWIFTSAGE_MEMORY_DIR"
    try:
        return shipped_store(), "the shipped warm store (no run has used memory yet)"
    except Exception as e:  # noqa: BLE001 - no shipped store: fall back to the configured directory
        return MemoryConfig().persist_dir, f"the configured directory (no shipped warm store: {e})"
