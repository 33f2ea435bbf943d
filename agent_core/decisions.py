"""Every decision a step makes that has no record of its own elsewhere, as a typed record tagged by `kind`.

A step record lists them in `decisions`, in the order they were taken; its `notes` are their `describe()` texts,
derived, never written by hand. Triggers, Gate-1 checks, menu answers, Critic calls and memory operations have
their own record types in `agent_core.trace`; these are the rest. Part of the trace schema: no agent code here.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass
class Decision:
    kind: str = ""  # the tag: which of the types below
    group: ClassVar[str] = ""  # who decided: swift | sage | buffer | srm | amm | safeguard

    def describe(self) -> str:  # pragma: no cover - every kind overrides it
        raise NotImplementedError



KINDS: dict[str, type[Decision]] = {}


def _kind(cls):
    KINDS[cls().kind] = cls
    return cls


@_kind
@dataclass
class Safeguard(Decision):
    """The last check before the JVM: the chosen text is not a valid action, so 'look around' is sent instead."""

    kind: str = "safeguard"
    group: ClassVar[str] = "safeguard"
    proposed: str = ""
    sent: str = "look around"

    def describe(self) -> str:
        return f"not sent to ScienceWorld: {self.proposed[:120]!r} is not a valid action here; '{self.sent}' instead"


@_kind
@dataclass
class UnnamedFocusRefused(Decision):
    """A buffered LLM action focuses on an object the task does not name: not played."""

    kind: str = "unnamed_focus_refused"
    group: ClassVar[str] = "buffer"
    action: str = ""

    def describe(self) -> str:
        return f"not played: '{self.action}' focuses on an object the task does not name (or names for later)"


@_kind
@dataclass
class BufferDrop(Decision):
    """A buffered action was not played: Gate-1 dropped it (SRM), or it maps onto no valid action (Baseline)."""

    kind: str = "buffer_drop"
    group: ClassVar[str] = "buffer"
    action: str = ""
    by: str = "gate1"  # gate1 | mapping
    detail: str = ""

    def describe(self) -> str:
        if self.by == "gate1":
            return f"Gate-1 dropped buffered action {self.action!r}: {self.detail}"
        return f"buffered action {self.action!r} matches no valid action" + (f" ({self.detail})" if self.detail else "")


@_kind
@dataclass
class BufferFailLimit(Decision):
    """Buffered actions failed `failures` times in a row: the buffer is emptied and Swift acts (now or next step)."""

    kind: str = "buffer_fail_limit"
    group: ClassVar[str] = "buffer"
    failures: int = 0
    when: str = "now"  # now (while taking from the buffer) | next_step (the played action failed)

    def describe(self) -> str:
        return f"{self.failures} buffered actions failed in a row: back to Swift" + (
            " next step" if self.when == "next_step" else "")


@_kind
@dataclass
class SagePick(Decision):
    """Sage's numbered grounding: which command it chose, and where it stood in the list it was shown."""

    kind: str = "sage_pick"
    group: ClassVar[str] = "sage"
    action: str = ""
    option: int | None = None  # 1-based position in the list; None: a command of its own
    of: int = 0

    def describe(self) -> str:
        where = f" (option {self.option} of {self.of})" if self.option else " (a command of its own, not in the list)"
        return f"Sage picked '{self.action}'" + where


@_kind
@dataclass
class OptionScores(Decision):
    """Sage chose by meaning (`sage.pick = score`): every option's length-normalised log-probability as its reply,
    best first. The pick is the first; the order the options were offered in plays no part."""

    kind: str = "option_scores"
    group: ClassVar[str] = "sage"
    purpose: str = "ground"  # ground (the pick after a plan) | focus_review | critic
    options: list[str] = field(default_factory=list)  # best first
    scores: list[float] = field(default_factory=list)  # what was compared, same order (see `rule`)
    # mean: the mean log-probability per token; pmi: `reply` less `alone` (sage.pick_rule)
    rule: str = "mean"
    reply: list[float] = field(default_factory=list)  # pmi: summed log-probability as the reply here, same order
    alone: list[float] = field(default_factory=list)  # pmi: the same as the reply to a prompt without the state

    def describe(self) -> str:
        what = {"focus_review": "the focus targets", "critic": "the Critic's actions"}.get(self.purpose, "the options")
        rows = ", ".join(f"'{o}' {s:.2f}" for o, s in zip(self.options[:4], self.scores[:4]))
        more = f" and {len(self.options) - 4} more" if len(self.options) > 4 else ""
        how = ("by what the plan and the state add to each option's log-probability" if self.rule == "pmi" else
               "by the model's log-probability per token")
        return f"Sage scored {what} {how}: {rows}{more}"


@_kind
@dataclass
class SageProblem(Decision):
    """Something in Sage's answer that could not be used as written (the parser says what)."""

    kind: str = "sage_problem"
    group: ClassVar[str] = "sage"
    text: str = ""

    def describe(self) -> str:
        return self.text


@_kind
@dataclass
class SageFallback(Decision):
    """Sage gave nothing to play: its call failed, or none of its actions passed; Swift's action stands."""

    kind: str = "sage_fallback"
    group: ClassVar[str] = "sage"
    reason: str = "failed"  # failed | nothing_passed | no_focus_target | deferred (sage.accept)
    error: str = ""  # failed: the error; deferred: why Sage's pick was not played

    def describe(self) -> str:
        if self.reason == "deferred":
            return f"Sage deferred to Swift: {self.error}; Swift's action stands"
        if self.reason == "failed":
            return f"Sage failed ({self.error}); falling back to Swift's action"
        if self.reason == "no_focus_target":
            return "Sage's focus review gave no focus target; falling back to Swift's action"
        return "no buffered action passed; falling back to Swift's action"


@_kind
@dataclass
class FocusReview(Decision):
    """The critical trigger under focus_review=choose: Sage compared the focus targets in view."""

    kind: str = "focus_review"
    group: ClassVar[str] = "sage"
    picked: str = ""  # "" : none of them is right yet
    option: int | None = None
    of: int = 0
    instead: str = ""  # with none picked: Swift's best other action, played instead

    def describe(self) -> str:
        if not self.picked:
            return (f"Sage's focus review: none of the {self.of} focus targets is right yet; Swift's best other action "
                    f"instead: '{self.instead}'")
        return f"Sage's focus review picked '{self.picked}' (option {self.option} of {self.of} focus targets)"


@_kind
@dataclass
class LoopGuard(Decision):
    """SRM's loop guard moved Swift off an action it kept repeating."""

    kind: str = "loop_guard"
    group: ClassVar[str] = "srm"
    detail: str = ""

    def describe(self) -> str:
        return f"Swift loop guard: {self.detail}"


@_kind
@dataclass
class UnsureFocusReplaced(Decision):
    """Swift is unsure of a focus and Sage is not called this step: Swift's best other action instead."""

    kind: str = "unsure_focus_replaced"
    group: ClassVar[str] = "swift"
    focus: str = ""
    instead: str = ""

    def describe(self) -> str:
        return (f"Swift is unsure of '{self.focus}' and Sage is not called this step: Swift's best other action "
                f"'{self.instead}' instead")


@_kind
@dataclass
class DeferredFocus(Decision):
    """Swift alone (nobody reviews a focus): a focus below the margin was set aside for its best other action."""

    kind: str = "deferred_focus"
    group: ClassVar[str] = "swift"
    focus: str = ""
    margin: float = 0.0
    threshold: float = 0.0
    instead: str = ""

    def describe(self) -> str:
        return (f"focus margin {self.margin:.2f} < {self.threshold:.2f}: '{self.focus}' set aside for "
                f"'{self.instead}'")


@_kind
@dataclass
class FocusMargin(Decision):
    """How sure Swift is of the object of its focus: its score margin among the focus targets in view."""

    kind: str = "focus_margin"
    group: ClassVar[str] = "swift"
    focus: str = ""
    margin: float = 0.0
    threshold: float = 0.0

    def describe(self) -> str:
        sure = "sure" if self.margin >= self.threshold else "unsure"
        return f"Swift's focus '{self.focus}': margin {self.margin:.2f} against {self.threshold:.2f} ({sure})"


@_kind
@dataclass
class NothingAdmissible(Decision):
    """SRM dropped every Swift candidate it tried and Sage gave nothing: 'look around' (changes nothing)."""

    kind: str = "nothing_admissible"
    group: ClassVar[str] = "srm"

    def describe(self) -> str:
        return "no Swift candidate passed Gate-1 and Sage gave nothing: 'look around' (changes nothing)"


@_kind
@dataclass
class AdmissibleRerank(Decision):
    """Every Swift candidate was dropped and Sage gave nothing: Swift ranked again over only the valid actions
    Gate-1 admits, and its best one is played instead of 'look around'."""

    kind: str = "admissible_rerank"
    group: ClassVar[str] = "srm"
    admissible: int = 0
    action: str = ""
    ranked: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (f"no Swift candidate passed Gate-1 and Sage gave nothing: Swift ranked again over the "
                f"{self.admissible} valid action(s) Gate-1 admits and plays '{self.action}'")


@_kind
@dataclass
class SwiftForced(Decision):
    """SwiftSage's streak rule: after `sage_calls` Sage calls in a row Swift acts once, whatever fired."""

    kind: str = "swift_forced"
    group: ClassVar[str] = "swift"
    sage_calls: int = 0
    set_aside: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"Swift forced: {self.sage_calls} Sage calls in a row; set aside: {', '.join(self.set_aside)}"


@_kind
@dataclass
class T1Retry(Decision):
    """AMM's T1: Swift retried with memory; whether the retry replaced its proposal."""

    kind: str = "t1_retry"
    group: ClassVar[str] = "amm"
    retry: str = ""
    replaced: str = ""
    valid: bool = False
    outside_top_k: int = 0  # > 0: valid, but not among Swift's own top k valid actions, so it replaced nothing

    def describe(self) -> str:
        if self.valid and self.outside_top_k:
            return (f"AMM T1: Swift's retry with memory proposed '{self.retry}': valid, but not among Swift's own "
                    f"top {self.outside_top_k} valid actions, so Swift's ranked action stands")
        if self.valid:
            return f"AMM T1: Swift's retry with memory proposed '{self.retry}': valid, it replaces '{self.replaced}'"
        # who acts next is the switching rules' call (Sage may be off, or Swift forced): the step's actor says it
        return f"AMM T1: Swift's retry with memory proposed '{self.retry}': {T1_STILL_INVALID}"


@_kind
@dataclass
class CriticWaiting(Decision):
    """A stagnation report waits for the action buffer to empty before the Critic runs."""

    kind: str = "critic_waiting"
    group: ClassVar[str] = "srm"
    report_step: int = 0

    def describe(self) -> str:
        return "a stagnation report is waiting for the action buffer to empty before the Critic runs"


@_kind
@dataclass
class Note(Decision):
    """A free-text remark from a trace written before decisions were typed (schema 1): kept as it was."""

    kind: str = "note"
    group: ClassVar[str] = ""
    text: str = ""

    def describe(self) -> str:
        return self.text


# Free-text notes of schema-1 traces that have a typed kind today. T1's old note said "so Sage is called"
# whether or not the switching rules then called Sage (they often did not): read as the typed record, its text is
# what the record shows, not that inference.
_LEGACY_T1 = re.compile(r"^AMM T1: Swift's retry with memory proposed '(.*)': (?:still invalid, so Sage is called|"
                        r"valid, it replaces '(.*)')$")
LEGACY_T1_OUTCOME = ": still invalid, so Sage is called"
T1_STILL_INVALID = "still invalid, so it replaces nothing"


def note_decision(text: str) -> Decision:
    """A schema-1 note as the typed decision it records, where one exists; else kept as a Note."""
    m = _LEGACY_T1.match(text)
    if m:
        return T1Retry(retry=m.group(1), replaced=m.group(2) or "", valid=m.group(2) is not None)
    return Note(text=text)


def decision_from_dict(data: dict[str, Any]) -> Decision:
    cls = KINDS.get(str(data.get("kind", "")))
    if cls is Note:
        return note_decision(str(data.get("text", "")))
    if cls is None:
        return Note(text=f"(a decision of unknown kind {data.get('kind')!r})")
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})
