"""Where recorded episodes and evaluations live, and which files a page may open.

Pages open traces only from these folders (live runs, shipped examples, evaluations): a path in a URL
or typed by a user that points elsewhere is refused, never read. The folders are read from the
environment on every call, so a test (or a deployment) can point them elsewhere."""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def runs_dir() -> Path:
    return Path(os.environ.get("SWIFTSAGE_RUNS_DIR") or ROOT / "runs")


def examples_dir() -> Path:
    return Path(os.environ.get("SWIFTSAGE_EXAMPLES_DIR") or ROOT / "assets" / "episodes")


def evals_dir() -> Path:
    return Path(os.environ.get("SWIFTSAGE_EVALS_DIR") or ROOT / "evals")


def shipped_evals_dir() -> Path:
    """Evaluations that ship with the app (assets/evaluations): the Evaluate page has something to show on a
    fresh install (SWIFTSAGE_SHIPPED_EVALS_DIR moves it)."""
    return Path(os.environ.get("SWIFTSAGE_SHIPPED_EVALS_DIR") or ROOT / "assets" / "evaluations")


def trace_roots() -> list[Path]:
    return [runs_dir(), examples_dir(), evals_dir(), shipped_evals_dir()]


@functools.lru_cache(maxsize=4096)
def real(path: str) -> Path:
    """`Path(path).resolve()`, remembered: resolving costs an lstat per path component, and every redraw of every
    browser asks again for the same few folders and traces."""
    return Path(path).resolve()


def inside(path: Path, root: Path) -> bool:
    try:
        return real(str(path)).is_relative_to(real(str(root)))
    except (OSError, RuntimeError, ValueError):
        return False


def resolve_trace(text: str | None) -> Path | None:
    """A trace path from a URL or a widget: relative to the project or absolute, a *.jsonl file under one of
    the trace roots. None for anything else (the caller says why)."""
    if not text or "\0" in text:
        return None
    p = Path(text)
    if not p.is_absolute():
        p = ROOT / p
    try:
        if p.suffix != ".jsonl" or not p.is_file():
            return None
    except (OSError, ValueError):
        return None
    return p if any(inside(p, r) for r in trace_roots()) else None  # links and '..' resolved first


def link_path(path: str | Path) -> str:
    """The shortest way to name a trace in a URL: relative to the project when inside it."""
    p = Path(path)
    try:
        return str(real(str(p)).relative_to(real(str(ROOT))))
    except (ValueError, OSError, RuntimeError):
        return str(p)


RECORDS_FILE = "RECORDS.txt"


def measurement_records(root: Path | None = None) -> set[Path]:
    """The evaluations under the evaluations folder that the repository commits as measurement records (the
    journal's raw traces), named one a line, relative to the folder, in its RECORDS.txt. They are not a user's
    own runs: the Evaluate page lists them after the shipped evaluations, so a fresh clone opens the shipped one."""
    root = evals_dir() if root is None else root
    try:
        lines = (root / RECORDS_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return set()
    return {real(str(root / s)) for line in lines if (s := line.split("#", 1)[0].strip())}


def evaluation_dirs() -> list[Path]:
    """Evaluation directories (holding evaluation.json): the user's own under the evaluations folder, newest
    first, then the shipped ones, then the measurement records the repository commits there."""
    def found(root: Path) -> list[Path]:
        if not root.is_dir():
            return []
        dirs = {p.parent for p in root.glob("*/evaluation.json")} | {p.parent for p in root.glob("evaluation.json")}
        return sorted(dirs, key=lambda p: (p / "evaluation.json").stat().st_mtime, reverse=True)

    records = measurement_records()
    own = found(evals_dir())
    out = [p for p in own if real(str(p)) not in records]
    out += [p for p in found(shipped_evals_dir()) if p not in out]
    out += [p for p in own if real(str(p)) in records]
    return out


def evaluation_label(path: str | Path) -> str:
    """An evaluation's name in a list, with where it comes from when it is not the user's own: the shipped
    cpu-30x2x30 and the record of the same name under evals/ must not read alike."""
    p = Path(path)
    if inside(p, shipped_evals_dir()):
        return f"{p.name} (shipped)"
    if real(str(p)) in measurement_records():
        return f"{p.name} (measurement record)"
    return p.name


_RUN_ID = re.compile(r"^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})-(.+)-v(\d+)-(.+)-[0-9a-f]{6}$")
_EVAL_ID = re.compile(r"^(.+)-v(\d+)-([a-z0-9-]+)$")


def trace_label(p: str | Path) -> str:
    """'boil v21 · baseline · 2026-11-30 05:57 (runs)' from the run id in the file name; evaluation traces
    ('boil-v21-srm.jsonl') read 'boil v21 · srm (evaluation NAME)'."""
    path = Path(p)
    if inside(path, examples_dir()):
        where = "examples"
    elif inside(path, evals_dir()) or inside(path, shipped_evals_dir()):
        root = evals_dir() if inside(path, evals_dir()) else shipped_evals_dir()
        parts = real(str(path)).relative_to(real(str(root))).parts
        where = f"evaluation {parts[0]}" if len(parts) > 3 else "evaluation"
    else:
        where = "runs"
    m = _RUN_ID.match(path.stem)
    if m:
        y, mo, d, h, mi, _s, task, var, pre = m.groups()
        return f"{task} v{var} · {pre} · {y}-{mo}-{d} {h}:{mi} ({where})"
    m = _EVAL_ID.match(path.stem)
    if m:
        task, var, pre = m.groups()
        return f"{task} v{var} · {pre} ({where})"
    return f"{path.stem} ({where})"
