"""Traces on disk: the JSON Lines writer (each step flushed and fsynced), the reader (tolerant of a half-written last
line and, on request, of corrupted lines), and a tail for traces still being written."""
from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator

from ..decisions import decision_from_dict, note_decision
from .schema import (SUPPORTED_SCHEMAS, ActionMapping, AfterStep, CriticCall, EnvEvent, Episode, EpisodeHeader,
                     EpisodeSummary, Gate1Decision, LLMCall, MemoryRetrieval, MemoryWrite, MenuChoice, StagnationReport,
                     StepRecord, SwiftCandidate, TraceError, Trigger)


# ---------- (de)serialisation ----------

def _from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Rebuild a dataclass from its asdict() form, including nested record types."""
    kwargs = {}
    names = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in data.items():
        if key not in names:
            continue  # tolerate additive fields from newer writers of the same schema
        kwargs[key] = value
    obj = cls(**kwargs)
    nested = {"trigger": Trigger, "swift_candidates": SwiftCandidate, "swift_valid_ranked": SwiftCandidate,
              "mappings": ActionMapping,
              "gate1": Gate1Decision, "llm_calls": LLMCall, "env_events": EnvEvent, "menu": MenuChoice,
              "stagnation": StagnationReport, "critic": CriticCall, "memories_written": MemoryWrite,
              "retrievals": MemoryRetrieval, "after": AfterStep}
    if isinstance(obj, StepRecord):
        obj.decisions = [decision_from_dict(d) if isinstance(d, dict) else d for d in obj.decisions]
        if not obj.decisions and obj.notes:  # schema 1: the decisions were free text
            obj.decisions = [note_decision(n) for n in obj.notes]
            obj.notes = [d.describe() for d in obj.decisions]
    for key, sub in nested.items():
        if not hasattr(obj, key):
            continue
        val = getattr(obj, key)
        build = getattr(sub, "from_dict", None) or (lambda v, sub=sub: _from_dict(sub, v))
        if isinstance(val, dict):
            setattr(obj, key, build(val))
        elif isinstance(val, list):
            setattr(obj, key, [build(v) if isinstance(v, dict) else v for v in val])
    return obj


def to_json_line(kind: str, record: Any) -> str:
    payload = {"kind": kind, **dataclasses.asdict(record)}
    return json.dumps(payload, ensure_ascii=False, default=str) + "\n"


class TraceWriter:
    """Appends records to a JSONL trace; each write is flushed and fsynced before returning."""

    def __init__(self, path: str | Path, header: EpisodeHeader):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            raise FileExistsError(f"refusing to overwrite existing trace {self.path}")
        self._fh = open(self.path, "a", encoding="utf-8")
        self.header = header
        self._write("header", header)
        self.steps_written = 0
        self.closed = False

    @classmethod
    def reopen(cls, path: str | Path, keep_steps: int) -> "TraceWriter":
        """Continue an interrupted trace: keep its header and first `keep_steps` step lines byte for byte, drop
        what follows (a summary of a stopped run, a half-written line), and append from there. The file is
        rewritten atomically, so a crash during this leaves the old one."""
        path = Path(path)
        raw = path.read_bytes().split(b"\n")
        kept: list[bytes] = []
        steps = 0
        for line in raw:
            if not line.strip():
                continue
            try:
                kind = json.loads(line).get("kind")
            except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
                break
            if kind == "header" and not kept:
                kept.append(line)
            elif kind == "step" and kept and steps < keep_steps:
                kept.append(line)
                steps += 1
            else:
                break
        if not kept or steps != keep_steps:
            raise TraceError(path, 1, f"cannot reopen: {steps} complete steps found, {keep_steps} expected")
        tmp = path.with_name(path.name + ".reopen")
        with open(tmp, "wb") as fh:
            fh.write(b"\n".join(kept) + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        self = cls.__new__(cls)
        self.path = path
        self.header = _from_dict(EpisodeHeader, {k: v for k, v in json.loads(kept[0]).items() if k != "kind"})
        self._fh = open(path, "a", encoding="utf-8")
        self.steps_written = steps
        self.closed = False
        return self

    def _write(self, kind: str, record: Any) -> None:
        self._fh.write(to_json_line(kind, record))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def append(self, record: StepRecord) -> None:
        if self.closed:
            raise ValueError(f"trace {self.path} is closed")
        self._write("step", record)
        self.steps_written += 1

    def close(self, summary: EpisodeSummary | None = None) -> None:
        if self.closed:
            return
        if summary is not None:
            self._write("summary", summary)
        self._fh.close()
        self.closed = True

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _iter_lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, ends with newline)."""
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh, start=1):
            yield i, line.rstrip("\n"), line.endswith("\n")


def read_episode(path: str | Path, tolerant: bool = False) -> Episode:
    """Read a trace. Raises TraceError (file:line) for an unknown schema or a corrupted line;
    a half-written last line (a crash mid-write) is reported in `Episode.truncated_tail`. With `tolerant`, a
    corrupted line after a readable header is skipped and kept in `Episode.problems`, so a page can show every
    readable step and name the lines it could not read."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no trace at {path}")
    lines = list(_iter_lines(path))
    if not lines:
        raise TraceError(path, 1, "empty file: no episode header")
    header: EpisodeHeader | None = None
    steps: list[StepRecord] = []
    summary: EpisodeSummary | None = None
    truncated: tuple[int, str] | None = None
    problems: list[TraceError] = []
    for idx, (no, text, has_nl) in enumerate(lines):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            if idx == len(lines) - 1 and not has_nl:
                truncated = (no, text)
                break
            err = TraceError(path, no, f"corrupted line (not valid JSON: {e.msg} at column {e.colno})")
        else:
            err = None
            try:
                kind, rec = _record(path, no, obj, header)
            except TraceError as e:
                err = e
            else:
                if kind == "header":
                    header = rec
                elif kind == "step":
                    steps.append(rec)
                else:
                    summary = rec
        if err is not None:
            if not tolerant or header is None:
                raise err
            problems.append(err)
    if header is None:
        raise TraceError(path, truncated[0] if truncated else 1, "no episode header")
    return Episode(path=path, header=header, steps=steps, summary=summary, truncated_tail=truncated,
                   problems=problems)


class TraceTail:
    """Reads a trace while it is being written (a class following the teacher's run). Each `poll` parses only
    the complete lines appended since the last one; a half-written last line waits for its newline; a file that
    was rewritten (a resumed run reopens its trace) is read again from the start. Thread-safe, so one tail serves
    every reader of a trace in a process."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, ino: int | None) -> None:
        self._ino, self._offset, self._line, self._pending = ino, 0, 0, b""
        self.header: EpisodeHeader | None = None
        self.steps: list[StepRecord] = []
        self.summary: EpisodeSummary | None = None
        self.problems: list[TraceError] = []

    def poll(self) -> Episode:
        """The episode as far as it is written now. Raises FileNotFoundError, or TraceError while the file has no
        readable header (a run that is just starting)."""
        with self._lock:
            st = os.stat(self.path)
            if st.st_ino != self._ino or st.st_size < self._offset:
                self._reset(st.st_ino)
            if st.st_size > self._offset:
                with open(self.path, "rb") as fh:
                    fh.seek(self._offset)
                    data = fh.read(st.st_size - self._offset)
                self._offset += len(data)
                *lines, self._pending = (self._pending + data).split(b"\n")
                for raw in lines:
                    self._line += 1
                    self._take(raw)
            if self.header is None:
                raise TraceError(self.path, 1, "no episode header yet")
            tail = (self._line + 1, self._pending.decode("utf-8", "replace")) if self._pending.strip() else None
            return Episode(path=self.path, header=self.header, steps=list(self.steps), summary=self.summary,
                           truncated_tail=tail, problems=list(self.problems))

    def _take(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            kind, rec = _record(self.path, self._line, json.loads(raw), self.header)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            self.problems.append(TraceError(self.path, self._line, f"corrupted line (not valid JSON: {e})"))
            return
        except TraceError as e:
            self.problems.append(e)
            return
        if kind == "header":
            self.header = rec
        elif kind == "step":
            self.steps.append(rec)
        else:
            self.summary = rec


def _record(path: Path, no: int, obj: Any, header: EpisodeHeader | None) -> tuple[str, Any]:
    """One parsed line: (kind, record), or TraceError naming the file and line."""
    if not isinstance(obj, dict) or "kind" not in obj:
        raise TraceError(path, no, "corrupted line (not a trace record: no 'kind')")
    obj = dict(obj)
    kind = obj.pop("kind")
    try:
        if kind == "header":
            if header is not None:
                raise TraceError(path, no, "second episode header")
            version = obj.get("schema_version")
            if version not in SUPPORTED_SCHEMAS:
                raise TraceError(path, no, f"unknown schema version {version!r}; this app reads {list(SUPPORTED_SCHEMAS)}")
            return kind, _from_dict(EpisodeHeader, obj)
        if header is None:
            raise TraceError(path, no, "step before the episode header")
        if kind == "step":
            return kind, _from_dict(StepRecord, obj)
        if kind == "summary":
            return kind, _from_dict(EpisodeSummary, obj)
        raise TraceError(path, no, f"unknown record kind {kind!r}")
    except (TypeError, KeyError, AttributeError, ValueError) as e:  # missing or mistyped fields
        if isinstance(e, TraceError):
            raise
        raise TraceError(path, no, f"corrupted {kind} record: {type(e).__name__}: {e}") from None


def has_summary(path: str | Path) -> bool:
    """Whether a trace ended cleanly (its last line is a summary), reading only the end of the file."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - 16384))  # a summary line is short; a longer last line is a step
            tail = fh.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    except OSError:
        return False
    return tail.startswith(b'{"kind": "summary"')


ROLLOUTS = "rollouts"  # the folder rollouts are kept in (runs/rollouts, assets/episodes/rollouts)


def list_traces(*roots: str | Path) -> list[Path]:
    """All trace files under the given folders, newest first; rollouts (a `rollouts` folder, agent_core.rollout)
    are branches of these episodes, not episodes of their own, and are left out."""
    found: list[Path] = []
    for root in roots:
        r = Path(root)
        if r.exists():
            found.extend(p for p in r.rglob("*.jsonl") if p.is_file() and ROLLOUTS not in p.relative_to(r).parts[:-1])
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)
