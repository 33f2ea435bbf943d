"""Ask the agent (the Generative Agents "interview"): a question retrieves memories by recency, importance and
relevance, then the LLM answers from them and cites them by number; the numbers are mapped back to memory ids.

Two steps, so a page shows the retrieved memories (and their score breakdown) while the slow model call runs:
`retrieve_for_question` then `answer_question`. The LLM is a plain callable `generate(prompt) -> text`, as in
reflection.py; a failure is recorded in the answer, never raised. Asking does not change the agent's memory:
last-access times are not updated unless the caller asks for it.
"""
from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from memory_store.reflection import Generate, load_prompt
from memory_store.scoring import RetrievalResult, ScoredCandidate
from memory_store.stream import MemoryStream

MAX_MEMORY_CHARS = 300  # one memory in the prompt (a long step observation is cut)
ANSWER_MAX_TOKENS = 120  # two or three sentences; a CPU model generates ~10 tokens/s
STOP = ("\nStudent", "\n\n\n")
_CITE = re.compile(r"\[(\s*\d+(?:\s*(?:,|and)\s*\d+)*\s*)\]")


def retrieve_for_question(stream: MemoryStream, question: str, *, k: int | None = None, now: float | None = None,
                          types: Sequence[str] | None = None, update_access: bool = False) -> RetrievalResult:
    """The agent's retrieval for a student's question (trigger "user"); `now` defaults to the store's latest time."""
    return stream.retrieve(question, now=stream.latest_time if now is None else now, k=k, trigger="user",
                           types=list(types) if types else None, update_access=update_access)


def top_candidates(result: RetrievalResult) -> list[ScoredCandidate]:
    """The k memories the retrieval returned, best first."""
    by_id = {c.id: c for c in result.candidates}
    return [by_id[i] for i in result.top_ids if i in by_id]


def interview_prompt(question: str, memories: Sequence[ScoredCandidate]) -> str:
    lines = []
    for i, c in enumerate(memories, 1):
        text = " ".join(c.description.split())
        lines.append(f"[{i}] {text[:MAX_MEMORY_CHARS]}{'...' if len(text) > MAX_MEMORY_CHARS else ''}")
    return load_prompt("interview").format(memories="\n".join(lines) or "(no memories)",
                                           question=" ".join(question.split()))


@dataclass
class Answer:
    question: str
    memory_ids: list[str]  # the memories shown to the LLM, in prompt order ([1] is memory_ids[0])
    prompt: str
    raw: str = ""  # the model's text as it came back
    text: str = ""  # the answer with [n] replaced by the memory ids, e.g. [m000012]
    cited: list[str] = field(default_factory=list)  # memory ids the answer cites, in order of first citation
    bad_citations: list[int] = field(default_factory=list)  # numbers that name no memory shown
    error: str | None = None
    latency_s: float = 0.0
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Answer":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def parse_citations(raw: str, memory_ids: Sequence[str]) -> tuple[str, list[str], list[int]]:
    """(text with ids, cited ids, numbers that name no memory). `[2]`, `[1, 3]` and `[1 and 3]` are read;
    an out-of-range number stays in the text as `[?7]` so a reader sees the model made it up."""
    cited: list[str] = []
    bad: list[int] = []

    def one(n: int) -> str:
        if 1 <= n <= len(memory_ids):
            mid = memory_ids[n - 1]
            if mid not in cited:
                cited.append(mid)
            return mid
        if n not in bad:
            bad.append(n)
        return f"?{n}"

    def repl(m: re.Match) -> str:
        return "[" + ", ".join(one(int(x)) for x in re.findall(r"\d+", m.group(1))) + "]"

    text = _CITE.sub(repl, raw.strip())
    return text, cited, bad


def answer_question(question: str, result: RetrievalResult, generate: Generate, *, model: str = "") -> Answer:
    """The LLM answers from the retrieved memories; its citations are checked against them."""
    mems = top_candidates(result)
    ans = Answer(question=question, memory_ids=[c.id for c in mems], prompt=interview_prompt(question, mems),
                 model=model)
    if not mems:
        ans.text = ans.raw = "I have no memories that could answer this."
        return ans
    t0 = time.perf_counter()
    try:
        out = generate(ans.prompt)
        ans.raw = "" if out is None else str(out)
    except Exception as e:  # noqa: BLE001 - any backend failure is shown, never raised
        ans.error = f"{type(e).__name__}: {e}"
    ans.latency_s = time.perf_counter() - t0
    if ans.error is None:
        # the model sometimes goes on with another "Student:" turn; the answer is its first turn only
        first = re.split(r"\n\s*(?:Student|You)\s*:", ans.raw)[0]
        ans.text, ans.cited, ans.bad_citations = parse_citations(first, ans.memory_ids)
        if not ans.text:
            ans.error = "the model returned an empty answer"
    return ans
