"""The step record and episode header (DESIGN.md), and their JSON Lines writer and reader.

This is the contract between the agent and the app: the agent writes one immutable record per
environment step, flushed and fsynced before the next step, so a crash never loses a finished
step; every page reads these files and nothing else.

File layout: line 1 is `{"kind": "header", ...EpisodeHeader}`, then one `{"kind": "step", ...}`
per step, and optionally a final `{"kind": "summary", ...}` when the episode ended cleanly.
"""
from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

SCHEMA_VERSION = 1
SUPPORTED_SCHEMAS = (1,)


class TraceError(ValueError):
    """A trace file cannot be read: names the file and line."""

    def __init__(self, path: str | Path, line: int, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        super().__init__(f"{path}:{line}: {message}")

    def __reduce__(self):  # picklable (the app caches episodes, problems included)
        return (type(self), (self.path, self.line, self.message))


# ---------- parts of a step record ----------

@dataclass
class SwiftCandidate:
    action: str
    score: float  # log-probability under Swift
    valid: bool | None = None  # None when validity was not checked


@dataclass
class Trigger:
    """Why control switched (or stayed): stuck / invalid / critical / unexpected / buffer_empty / ..."""

    name: str
    rule: str  # the rule in words with its number, e.g. "stuck: the last 5 rewards sum to 0"
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class LLMCall:
    """One model call with its exact prompt and raw output (or the error that replaced it)."""

    purpose: str  # plan | ground | critic | importance | reflection | ...
    backend: str
    model: str
    prompt: str
    output: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    cpu_threads: int = 0  # the embedded model's CPU threads for this call (0: not an embedded call, or not known)


@dataclass
class ActionMapping:
    """How one Sage/Critic action was mapped onto the valid-action set."""

    raw: str
    mapped: str | None
    method: str  # exact | normalized | similarity | unmapped
    similarity: float | None = None
    reason: str = ""  # why it stayed unmapped


@dataclass
class Gate1Decision:
    """SRM's Gate-1 on one proposed action (SPEC.md section 6): normalize -> admissibility -> repair -> drop.

    decision: ACCEPT (admissible as written, after normalization) | REPAIR (a small, safe, deterministic fix
    made it admissible; `result` is the repaired form) | DROP (not executed; `result` is None).
    reason: a code from agent_core.srm.gate1.REASONS (e.g. NOT_IN_VALID_ACTIONS, REPAIR_CASE); `detail`
    says it in words for this action."""

    source: str  # swift | sage | critic | menu
    proposed: str  # the text as the source wrote it
    decision: str  # ACCEPT | REPAIR | DROP
    result: str | None = None  # the action that would run (None when dropped)
    reason: str = ""  # reason code
    normalized: str = ""  # the proposed text after normalization
    detail: str = ""  # the reason in words
    similarity: float | None = None  # for REPAIR_NEAREST: cosine similarity to the chosen valid action


@dataclass
class MenuChoice:
    """ScienceWorld answered an ambiguous action with a numbered menu; this is how the agent answered it."""

    request: str  # the action that produced the menu
    options: list[str]  # the menu's options, index = the number to type
    chosen: int  # the number sent; -1: cancelled with a blank answer (Gate-1 never guesses a focus target)
    chooser: str  # swift (its own proposal was a number) | gate1 (SRM picked) | default (first option)
    why: str = ""


@dataclass
class StagnationReport:
    """SRM's stagnation detector fired after this step (SPEC.md section 6)."""

    modes: list[str]  # e.g. SAME_OBS_3, REPEAT_ACTION_2_NO_EFFECT, REPEAT_VERB_3_NO_EFFECT, MOVE_SPAM_4_OF_5
    counts: dict[str, int] = field(default_factory=dict)  # mode -> how many times its pattern was seen
    window: int = 5  # steps looked back over
    last_action: str = ""
    observation_signature: str = ""  # the clipped observation that repeats
    actions_to_avoid: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)  # e.g. "no focus now", "at most one move"
    explanation: list[str] = field(default_factory=list)  # each mode in words with its number


@dataclass
class CriticCall:
    """One decision about the bounded Critic: called (with its prompt, answer and parsed actions), or
    skipped / failed with the reason. Its actions pass Gate-1 and enter the action buffer."""

    status: str  # called | failed | repeat_skipped | budget_exhausted | cooldown | expired | cancelled
    report_step: int  # the step whose stagnation report asked for it
    reason: str = ""  # the status in words
    prompt: str = ""
    output: str = ""
    diagnosis: str = ""
    course_correction: str = ""
    actions: list[str] = field(default_factory=list)  # parsed from the answer, before Gate-1
    admitted: list[str] = field(default_factory=list)  # after Gate-1, as they entered the buffer
    buffer_policy: str = ""  # replace | append
    budget_used: int = 0  # calls so far in this episode, this one included
    budget: int = 0
    error: str | None = None
    latency_s: float = 0.0
    problems: list[str] = field(default_factory=list)


@dataclass
class EnvEvent:
    """Something the environment layer did that the user must see (e.g. a JVM restart)."""

    kind: str
    detail: str
    at_s: float = field(default_factory=time.time)


@dataclass
class MemoryWrite:
    """A salient step stored in the episodic memory (AMM), or a plan / reflection stored by the agent."""

    tag: str  # success | near-miss | avoidance | plan | insight
    rule: str  # the salience rule that fired (agent_core/amm/salience.py), "plan" or "reflection"
    why: str  # the rule in words, with the numbers
    text: str  # the stored description (exactly what retrieval later sees)
    id: str = ""  # the memory's id in the store ("" when the write failed)
    type: str = "observation"  # observation | plan | reflection
    importance: float = 0.0
    importance_source: str = ""  # tag-rule | llm | default
    now: float = 0.0  # the store's clock at the write
    elapsed_ms: float = 0.0
    error: str | None = None  # the write failed: why (the run went on)
    duplicate_of: str = ""  # not written again: this episode already stored the same record (that id)


@dataclass
class MemoryRetrieval:
    """One triggered retrieval (T1-T4, critic evidence) with every candidate's score breakdown and what
    was injected where."""

    trigger: str  # T1 | T2 | T3 | T4 | critic
    why: str  # what fired it, in words
    query: str
    result: Any = None  # memory_store.scoring.RetrievalResult (None when the retrieval failed)
    injected_into: str = ""  # swift | sage | critic | "" (retrieved and cached, not injected)
    injected_ids: list[str] = field(default_factory=list)
    injected_text: str = ""  # exactly what went into the prompt / Swift's input
    outcome: str = ""  # e.g. what Swift's retry proposed
    elapsed_ms: float = 0.0
    error: str | None = None  # retrieval or formatting failed: the prompt stayed unmodified

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MemoryRetrieval":
        from memory_store.scoring import RetrievalResult

        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        if isinstance(kw.get("result"), dict):
            kw["result"] = RetrievalResult.from_dict(kw["result"])
        return cls(**kw)


@dataclass
class StepRecord:
    step: int  # 1-based index of the environment step
    action: str
    system: str  # swift | sage | critic | user
    observation: str
    look: str
    inventory: str
    score: float
    reward: float
    moves: int
    done: bool
    failed: bool
    room: str
    action_valid: bool | None = None
    trigger: Trigger | None = None
    swift_candidates: list[SwiftCandidate] = field(default_factory=list)
    swift_top1: str | None = None  # unconstrained top-1, needed by the invalid trigger and Gate-1
    swift_valid_ranked: list[SwiftCandidate] = field(default_factory=list)  # beam constrained to valid actions
    # Swift's guess was a `focus on`; these focus targets in view were kept out of its choice because the task
    # does not name them (agent_core.task_focus)
    swift_focus_unnamed: list[str] = field(default_factory=list)
    # Sage was called; these focus targets in view were left out of its options (and not played when it wrote
    # one itself) because the task does not name them (sage.task_focus_check)
    sage_focus_unnamed: list[str] = field(default_factory=list)
    sage_focus_refused: list[str] = field(default_factory=list)  # buffered commands among them: not played
    plan: dict[str, str] = field(default_factory=dict)  # Q1..Q5
    buffer_before: list[str] = field(default_factory=list)
    buffer_after: list[str] = field(default_factory=list)
    mappings: list[ActionMapping] = field(default_factory=list)
    gate1: list[Gate1Decision] = field(default_factory=list)  # empty unless SRM is on
    menu: MenuChoice | None = None  # this step answered ScienceWorld's ambiguity menu
    stagnation: StagnationReport | None = None  # the detector fired after this step (SRM)
    critic: CriticCall | None = None  # the Critic was called (or a due call was skipped) at this step (SRM)
    memories_written: list[MemoryWrite] = field(default_factory=list)  # AMM: salient step, plan
    retrievals: list[MemoryRetrieval] = field(default_factory=list)  # AMM: T1-T4 and critic evidence
    llm_calls: list[LLMCall] = field(default_factory=list)
    env_events: list[EnvEvent] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per part: swift, sage, env, ...
    notes: list[str] = field(default_factory=list)
    mode_after: str = "swift"  # who acts next: sage while its buffer has actions, else swift
    buffer_after_sources: list[str] = field(default_factory=list)  # sage | critic for each buffer_after item
    # a fork's first steps are its parent's, replayed in a fresh environment and checked against the parent's
    # observations and scores (agent_core.fork); True on those copies
    replayed: bool = False


@dataclass
class EpisodeHeader:
    task: str
    task_index: int
    variation: int
    split: str
    task_description: str
    config: dict[str, Any]
    models: dict[str, str]  # role -> model name, e.g. {"swift": ..., "sage": ...}
    seed: int = 0
    started_at: float = field(default_factory=time.time)
    schema_version: int = SCHEMA_VERSION
    run_id: str = ""
    initial_observation: str = ""
    initial_look: str = ""
    initial_inventory: str = ""
    # what actually ran in this episode (agent_core.controller.MECHANISMS): swift, sage, gate1, stagnation,
    # critic, loop_guard, ...; empty in traces written before this field existed (read: swift + sage)
    mechanisms: list[str] = field(default_factory=list)
    # AMM: the memory store this run read and wrote, its size and clock when the episode started
    memory_store: str = ""
    memory_at_start: dict[str, Any] = field(default_factory=dict)  # {"memories": n, "clock": t, "seeded_from": ...}
    # a fork: {"trace": parent file, "run_id": parent's run id, "step": steps replayed, "preset": parent's preset}
    parent: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeSummary:
    final_score: float
    success: bool
    failed: bool
    steps: int
    reason: str  # success | failure | step_limit | stopped | error
    ended_at: float = field(default_factory=time.time)
    error: str | None = None
    memory: dict[str, Any] = field(default_factory=dict)  # AMM: writes by tag, triggers, reflection status
    # each time an interrupted run was continued (agent_core.run --resume): after which step, when, replay time
    resumed: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Episode:
    path: Path
    header: EpisodeHeader
    steps: list[StepRecord]
    summary: EpisodeSummary | None
    truncated_tail: tuple[int, str] | None = None  # (line number, text) of a half-written last line
    problems: list[TraceError] = field(default_factory=list)  # lines skipped by read_episode(tolerant=True)


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
              "retrievals": MemoryRetrieval}
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


def list_traces(*roots: str | Path) -> list[Path]:
    """All trace files under the given folders, newest first."""
    found: list[Path] = []
    for root in roots:
        r = Path(root)
        if r.exists():
            found.extend(p for p in r.rglob("*.jsonl") if p.is_file())
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)
