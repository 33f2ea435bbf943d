"""The step record, the episode header and summary, and their parts: the trace schema (docs/ARCHITECTURE.md)."""
from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..decisions import Decision

if TYPE_CHECKING:
    from memory_store.scoring import RetrievalResult

# 2: steps carry `after` (the state digest replay checks), `menu_options` and typed `decisions`; headers carry the
# code revision and the config hash. Version 1 traces still open: their missing fields keep their defaults.
SCHEMA_VERSION = 2
SUPPORTED_SCHEMAS = (1, 2)
_TIMEOUT_TEXT = re.compile(r"\b(within|for more than) [0-9.e+]+ s\b")  # LLMCall.failure on traces without error_kind


class TraceError(ValueError):
    """A trace file cannot be read: names the file and line."""

    def __init__(self, path: str | Path, line: int, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        super().__init__(f"{path}:{line}: {message}")

    def __reduce__(self):  # picklable (the app caches episodes, problems included)
        return (type(self), (self.path, self.line, self.message))


# ---------- typed payloads (JSON objects in the file, read back as plain dicts) ----------

class TriggerEvidence(TypedDict, total=False):
    """What a switch saw: which keys are present depends on the trigger."""

    swift_top1: str  # invalid
    rule: str  # invalid: top1 | ranked
    swift_action: str  # critical
    focus_margin: float | None  # critical
    markers: list[str]  # unexpected
    observation: str  # unexpected
    rewards: list[float]  # stuck
    dropped: list[str]  # gate1_drops
    buffer_failures: int  # buffer_empty / buffer_failed
    set_aside: list[str]  # swift_forced
    set_aside_rules: list[str]  # swift_forced
    sage_calls_in_a_row: int  # swift_forced
    all_triggers: list[str]  # every trigger that fired with the one that called Sage


class ConfigRecord(TypedDict, total=False):
    """`Config.to_record()`: the preset, the seed, and one mapping of field -> value per section (env, swift, sage,
    controller, llm, amm, srm, memory, eval; see agent_core.config)."""

    preset: str
    seed: int
    env: dict[str, object]
    swift: dict[str, object]
    sage: dict[str, object]
    controller: dict[str, object]
    llm: dict[str, object]
    amm: dict[str, object]
    srm: dict[str, object]
    memory: dict[str, object]
    eval: dict[str, object]


class MemoryAtStart(TypedDict, total=False):
    memories: int  # the store's size when the episode started
    clock: float  # the episode's memory clock: `now` at step t is clock + t
    seeded_from: str
    error: str  # the store could not be opened: the run went on without memory


class ForkOrigin(TypedDict, total=False):
    trace: str  # the parent's file
    run_id: str
    step: int  # the parent's steps replayed
    preset: str  # the parent's preset
    same_settings: bool  # the fork kept the parent's whole state (agent_core.episode.replay.fork_state)
    replay_s: float


class CodeRevision(TypedDict, total=False):
    commit: str  # the git commit ("" when not known)
    modified: bool  # tracked code files had uncommitted changes
    diff: str  # a hash of those changes
    source: str  # git | environment | unknown


class MachineInfo(TypedDict, total=False):
    cpu: str  # the CPU's model name
    isa: str  # avx512 | avx512+bf16 | avx2 | avx | ...: the widest vector instructions the CPU offers
    cores: int


class ResumeInfo(TypedDict, total=False):
    at_step: int
    at: float
    replay_s: float
    dropped_half_written_line: bool
    previous_end: str
    exact: bool  # same code and settings, and a trace with state digests
    changes: list[str]  # what differs from the recording
    memory: dict[str, int]  # the store's rollback: {"removed": n, "access_restored": n}


class MemorySummary(TypedDict, total=False):
    writes: dict[str, int]
    triggers: dict[str, int]
    injections: dict[str, int]
    errors: int
    store: str
    reflection: str


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
    evidence: TriggerEvidence = field(default_factory=dict)  # type: ignore[assignment]


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
    # timeout | connection | http | malformed | cancelled | exhausted | llm | crash (agent_core.llm.failure_of);
    # None when the call succeeded, and in traces recorded before the field (see `failure`)
    error_kind: str | None = None
    cpu_threads: int = 0  # the embedded model's CPU threads for this call (0: not an embedded call, or not known)
    # prompt tokens the model did not read again: llama.cpp's cache held them from the call before (embedded only)
    cached_tokens: int = 0
    # embedded only: what the call found of its agent's prompt cache on the shared model: held (as its last call left
    # it), restored (another session's calls came between; given back as it was), empty (the episode's first call),
    # lost (dropped for room while other sessions ran: read afresh, so the answer may differ from a run alone)
    cache_state: str = ""

    def failure(self) -> str | None:
        """None when the call succeeded, else its kind; a trace recorded before `error_kind` existed is read from the
        message: every timeout's says how long was waited ("did not finish within 120 s", "busy for more than
        60 s"), a Pause's says "cancelled after", anything else is `other`."""
        if not self.error:
            return None
        if self.error_kind:
            return self.error_kind
        if _TIMEOUT_TEXT.search(self.error):
            return "timeout"
        return "cancelled" if "cancelled after" in self.error else "other"


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
    """SRM's Gate-1 on one proposed action (docs/AGENT.md §6.1): normalize -> admissibility -> repair -> drop.

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
    """SRM's stagnation detector fired after this step (docs/AGENT.md §6.2)."""

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

    # called | failed | repeat_skipped | budget_exhausted | cooldown | expired | cancelled, or waiting (the report
    # waits for the action buffer to empty; it is served later)
    status: str
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
    content_key: str = ""  # what makes two records the same (agent_core.amm.salience.content_key); "" for plans


@dataclass
class MemoryRetrieval:
    """One triggered retrieval (T1-T4, critic evidence) with every candidate's score breakdown and what
    was injected where."""

    trigger: str  # T1 | T2 | T3 | T4 | critic
    why: str  # what fired it, in words
    query: str
    result: RetrievalResult | None = None  # None when the retrieval failed
    injected_into: str = ""  # swift | sage | critic | "" (retrieved and cached, not injected)
    injected_ids: list[str] = field(default_factory=list)
    injected_text: str = ""  # exactly what went into the prompt / Swift's input
    outcome: str = ""  # e.g. what Swift's retry proposed
    elapsed_ms: float = 0.0
    error: str | None = None  # retrieval or formatting failed: the prompt stayed unmodified
    subject: str = ""  # T3: the key of the repeated invalid action (T3 fires once per action and episode)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MemoryRetrieval":
        from memory_store.scoring import RetrievalResult

        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        if isinstance(kw.get("result"), dict):
            kw["result"] = RetrievalResult.from_dict(kw["result"])
        from agent_core.decisions import LEGACY_T1_OUTCOME, T1_STILL_INVALID

        if str(kw.get("outcome", "")).endswith(LEGACY_T1_OUTCOME):  # schema 1's T1 text: read as today's record
            kw["outcome"] = kw["outcome"].removesuffix(LEGACY_T1_OUTCOME) + ": " + T1_STILL_INVALID
        return cls(**kw)


@dataclass
class AfterStep:
    """The agent's state after a step, in the parts that the environment cannot give back: who acts next, the
    action buffer, the switching counters, SRM's report / avoid list / Critic budget, the menus answered, and the
    size of AMM's episode caches. `agent_core.episode.reducer.apply` rebuilds it from the record; a replay that
    rebuilds a different one stops there."""

    mode: str = "swift"  # sage while the buffer is being executed (it may be empty: the next step says so)
    buffer: list[str] = field(default_factory=list)
    buffer_sources: list[str] = field(default_factory=list)
    buffer_failures: int = 0  # buffered actions that failed in a row
    steps_since_sage: int = 0
    sage_streak: int = 0
    focus_done: int = 0
    pending_report_step: int | None = None  # a stagnation report waiting for the Critic
    last_report_step: int | None = None
    avoid: list[str] = field(default_factory=list)
    avoid_until: int = 0
    critic_calls: int = 0
    last_critic_step: int | None = None
    critic_backoff_until: int = 0
    menu_tried: dict[str, list[int]] = field(default_factory=dict)
    memory_written: int = 0  # records this episode wrote (AMM de-duplication)
    t3_fired: list[str] = field(default_factory=list)


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
    notes: list[str] = field(default_factory=list)  # the decisions' describe() texts, in order (derived)
    mode_after: str = "swift"  # who acts next: sage while its buffer has actions, else swift
    buffer_after_sources: list[str] = field(default_factory=list)  # sage | critic for each buffer_after item
    # a fork's first steps are its parent's, replayed in a fresh environment and checked against the parent's
    # observations and scores (agent_core.fork); True on those copies
    replayed: bool = False
    menu_options: list[str] = field(default_factory=list)  # the observation is ScienceWorld's numbered menu
    after: AfterStep | None = None  # the state after this step (None in traces of schema 1)
    decisions: list[Decision] = field(default_factory=list)  # agent_core.decisions: typed, tagged by kind


@dataclass
class EpisodeHeader:
    task: str
    task_index: int
    variation: int
    split: str
    task_description: str
    config: ConfigRecord
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
    memory_at_start: MemoryAtStart = field(default_factory=dict)  # type: ignore[assignment]
    # a fork: {"trace": parent file, "run_id": parent's run id, "step": steps replayed, "preset": parent's preset}
    parent: ForkOrigin = field(default_factory=dict)  # type: ignore[assignment]
    # which code and settings made this trace (agent_core.provenance): {"commit", "modified", "source"}, and a
    # hash of the effective config; empty in traces written before these fields existed
    code: CodeRevision = field(default_factory=dict)  # type: ignore[assignment]
    config_hash: str = ""
    # the machine that played (agent_core.provenance.machine): the same code can rank differently on another CPU
    machine: MachineInfo = field(default_factory=dict)  # type: ignore[assignment]


@dataclass
class EpisodeSummary:
    final_score: float
    success: bool
    failed: bool
    steps: int
    reason: str  # success | failure | step_limit | stopped | error
    ended_at: float = field(default_factory=time.time)
    error: str | None = None
    memory: MemorySummary = field(default_factory=dict)  # type: ignore[assignment]  # AMM: counts, reflection
    # each time an interrupted run was continued (agent_core.run --resume): after which step, when, replay time
    resumed: list[ResumeInfo] = field(default_factory=list)


@dataclass
class Episode:
    path: Path
    header: EpisodeHeader
    steps: list[StepRecord]
    summary: EpisodeSummary | None
    truncated_tail: tuple[int, str] | None = None  # (line number, text) of a half-written last line
    problems: list[TraceError] = field(default_factory=list)  # lines skipped by read_episode(tolerant=True)
