"""LLM-driven parts of the memory stream: importance rating and reflection (docs/AGENT.md §7).

The LLM is a plain callable `generate(prompt) -> raw text`; it may raise anything. Every call is
recorded (prompt, raw output, error, latency) so traces and the app can show it; a failure never
propagates: importance falls back to the config default, a reflection records the error and
stores nothing.

Reflection, as in Generative Agents: when the summed importance of memories since the last
reflection exceeds the threshold (150), the most recent memories (100) -> the LLM asks the most
salient high-level questions (3) -> a retrieval per question -> the LLM states insights citing
the numbered statements -> each insight is stored as a reflection with its evidence ids and a
depth one above its deepest evidence (a tree: leaves are observations).
"""
from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from memory_store.config import MemoryConfig
from memory_store.scoring import RetrievalResult
from memory_store.stream import Memory, MemoryStream

Generate = Callable[[str], str]
PROMPT_DIR = Path(__file__).with_name("prompts")


def load_prompt(name: str) -> str:
    return (PROMPT_DIR / f"{name}.txt").read_text()


@dataclass
class LLMExchange:
    """One call of `generate`: what was asked and what came back (or the error)."""

    purpose: str  # importance | reflection_questions | reflection_insights
    prompt: str
    output: str = ""
    error: str | None = None
    latency_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _call(generate: Generate, purpose: str, prompt: str) -> LLMExchange:
    ex = LLMExchange(purpose=purpose, prompt=prompt)
    t0 = time.perf_counter()
    try:
        out = generate(prompt)
        ex.output = "" if out is None else str(out)
    except Exception as e:  # any backend failure is recorded, never raised
        ex.error = f"{type(e).__name__}: {e}"
    ex.latency_s = time.perf_counter() - t0
    return ex


# ------------------------------------------------------------------ importance

@dataclass
class ImportanceRating:
    value: float  # clamped to [importance_min, importance_max]; the default when rating failed
    call: LLMExchange
    error: str | None = None  # why the default stands in
    parsed: float | None = None  # the number read from the output, before clamping

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "error": self.error, "parsed": self.parsed, "call": self.call.to_dict()}


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")


def parse_rating(text: str) -> float | None:
    """The first number in the output ("Rating: 7", "7/10", "I'd say 8."), or None."""
    m = _NUMBER.search(text or "")
    return float(m.group()) if m else None


def rate_importance(description: str, generate: Generate, config: MemoryConfig | None = None,
                    task: str = "") -> ImportanceRating:
    """Ask the LLM for a 1..10 importance; parse, clamp; on failure use default_importance."""
    c = config or MemoryConfig()
    prompt = load_prompt("importance").format(description=description, task=task or "(not given)")
    call = _call(generate, "importance", prompt)
    if call.error:
        return ImportanceRating(c.default_importance, call, f"LLM failed: {call.error}")
    parsed = parse_rating(call.output)
    if parsed is None:
        return ImportanceRating(c.default_importance, call, f"no number in output {call.output[:80]!r}")
    value = float(min(max(parsed, c.importance_min), c.importance_max))
    return ImportanceRating(value, call, None, parsed)


# ------------------------------------------------------------------ reflection

@dataclass
class Insight:
    text: str
    question: str
    evidence_ids: list[str]
    memory_id: str | None = None  # the stored reflection


@dataclass
class ReflectionResult:
    now: float
    importance_sum: float  # what triggered it
    questions: list[str] = field(default_factory=list)
    retrievals: list[RetrievalResult] = field(default_factory=list)
    insights: list[Insight] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # output lines that cited no shown statement
    calls: list[LLMExchange] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def reflection_ids(self) -> list[str]:
        return [i.memory_id for i in self.insights if i.memory_id]

    def to_dict(self) -> dict[str, Any]:
        return {"now": self.now, "importance_sum": self.importance_sum, "questions": list(self.questions),
                "retrievals": [r.to_dict() for r in self.retrievals],
                "insights": [dataclasses.asdict(i) for i in self.insights], "rejected": list(self.rejected),
                "calls": [c.to_dict() for c in self.calls], "errors": list(self.errors)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ReflectionResult":
        return cls(now=d["now"], importance_sum=d.get("importance_sum", 0.0),
                   questions=list(d.get("questions", [])),
                   retrievals=[RetrievalResult.from_dict(r) for r in d.get("retrievals", [])],
                   insights=[Insight(**i) for i in d.get("insights", [])], rejected=list(d.get("rejected", [])),
                   calls=[LLMExchange(**c) for c in d.get("calls", [])], errors=list(d.get("errors", [])))


_LEAD = re.compile(r"^\s*(?:[-*•]|\d+[.):]|q\d+[.):]?|question\s*\d*[.):]?)\s*", re.IGNORECASE)


def parse_questions(text: str, n: int) -> list[str]:
    """Up to n questions, one per line; lines ending in '?' are preferred."""
    lines = [_LEAD.sub("", ln).strip() for ln in (text or "").splitlines()]
    lines = [ln for ln in lines if len(ln) > 3]
    asked = [ln for ln in lines if ln.endswith("?")]
    return (asked or lines)[:n]


_CITE = re.compile(r"\(([^()]*\d[^()]*)\)\s*\.?\s*$")


def parse_insights(text: str, numbered_ids: list[str]) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """Lines "insight (because of 1, 5, 3)" -> (insight, cited memory ids). Numbers refer to the
    numbered statements shown; memory ids (m000012) shown there are accepted too. Lines citing
    nothing that was shown are rejected, since an insight must rest on evidence."""
    shown = set(numbered_ids)
    good: list[tuple[str, list[str]]] = []
    rejected: list[str] = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        body = _LEAD.sub("", line).strip()
        m = _CITE.search(body)
        if not m:
            rejected.append(line)
            continue
        insight = body[: m.start()].strip().rstrip(":-—").strip()
        cited: list[str] = []
        for tok in re.findall(r"m\d{6}|\d+", m.group(1)):
            mid = tok if tok.startswith("m") else (numbered_ids[int(tok) - 1]
                                                   if 1 <= int(tok) <= len(numbered_ids) else None)
            if mid in shown and mid not in cited:
                cited.append(mid)
        if insight and cited:
            good.append((insight, cited))
        else:
            rejected.append(line)
    return good, rejected


def should_reflect(stream: MemoryStream, config: MemoryConfig | None = None) -> bool:
    c = config or stream.config
    return stream.importance_since_last_reflection() > c.reflection_threshold


def maybe_reflect(stream: MemoryStream, generate: Generate, now: float, *, task: str = "",
                  episode: str | int = "", config: MemoryConfig | None = None,
                  importance: float | None = None, tag: str = "",
                  statement: Callable[[Memory], str] | None = None) -> ReflectionResult | None:
    """Reflect when the summed importance since the last reflection exceeds the threshold;
    None when it does not."""
    if not should_reflect(stream, config):
        return None
    return reflect(stream, generate, now, task=task, episode=episode, config=config, importance=importance, tag=tag,
                   statement=statement)


def reflect(stream: MemoryStream, generate: Generate, now: float, *, task: str = "",
            episode: str | int = "", config: MemoryConfig | None = None,
            importance: float | None = None, tag: str = "",
            statement: Callable[[Memory], str] | None = None) -> ReflectionResult:
    """GA's reflection. `importance` given: every insight gets it (no rating call per insight, which on a
    CPU costs a minute each); None: the LLM rates each insight. `statement` turns a memory into the line the
    prompts show (default: its description); a caller with long structured records passes a compact form
    so 100 statements fit a small model's context."""
    line = statement or (lambda m: m.description)
    c = config or stream.config
    res = ReflectionResult(now=float(now), importance_sum=stream.importance_since_last_reflection())
    recent = stream.recent(c.reflection_recent_window)
    if not recent:
        res.errors.append("no memories to reflect on")
        return res
    statements = "\n".join(f"[{m.id}] {line(m)}" for m in recent)
    q_call = _call(generate, "reflection_questions",
                   load_prompt("reflection_questions").format(statements=statements, n=c.reflection_questions))
    res.calls.append(q_call)
    if q_call.error:
        res.errors.append(f"questions: LLM failed: {q_call.error}")
    else:
        res.questions = parse_questions(q_call.output, c.reflection_questions)
        if not res.questions:
            res.errors.append(f"questions: none found in output {q_call.output[:80]!r}")
    seen_texts = {m.description.strip().lower() for m in stream.memories() if m.type == "reflection"}
    for question in res.questions:
        try:
            r = stream.retrieve(question, now, c.reflection_retrieve_k, trigger="reflection")
        except Exception as e:  # a broken store must not crash the agent's step
            res.errors.append(f"retrieval for {question!r} failed: {type(e).__name__}: {e}")
            continue
        res.retrievals.append(r)
        ids = r.top_ids
        if not ids:
            continue
        by_id = {cand.id: cand for cand in r.candidates}
        numbered = "\n".join(f"{i}. {line(stream.get(mid)) if stream.get(mid) else by_id[mid].description}"
                              for i, mid in enumerate(ids, 1))
        i_call = _call(generate, "reflection_insights", load_prompt("reflection_insights").format(
            statements=numbered, question=question, n=c.reflection_insights_per_question))
        res.calls.append(i_call)
        if i_call.error:
            res.errors.append(f"insights for {question!r}: LLM failed: {i_call.error}")
            continue
        good, rejected = parse_insights(i_call.output, ids)
        res.rejected.extend(rejected)
        for text, evidence in good[: c.reflection_insights_per_question]:
            if text.strip().lower() in seen_texts:
                continue  # the same insight again adds nothing to the tree
            seen_texts.add(text.strip().lower())
            res.insights.append(Insight(text=text, question=question, evidence_ids=evidence))
    for ins in res.insights:
        if importance is None:
            rating = rate_importance(ins.text, generate, c, task=task)
            res.calls.append(rating.call)
            value, err, src = rating.value, rating.error or "", "llm" if not rating.error else "default"
        else:
            value, err, src = importance, "", "fixed"
        mem: Memory = stream.add(ins.text, now, "reflection", importance=value, importance_error=err,
                                 importance_source=src, task=task, episode=episode, evidence_ids=ins.evidence_ids,
                                 tag=tag)
        ins.memory_id = mem.id
    if not res.insights:
        stream.mark_reflection_failed()
    return res
