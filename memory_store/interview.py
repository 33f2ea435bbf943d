"""Ask the agent (the Generative Agents "interview"): a question retrieves memories by recency, importance and
relevance, then the LLM answers from them and cites them by number; the numbers are mapped back to memory ids.
Every answer line is then checked against the memories it cites (`check_support`): a line that says what its
memories do not is flagged "not supported by m000005", so a confident answer cannot pass for a cited one.
A question the step records answer exactly is answered from them instead (views/ask_records.py); the model may
only phrase that answer (`phrase_facts`), and a phrasing that loses a quoted action or a number is not used.

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
    grounding: str = "memories"  # memories: the model answered from them | records: built from the step records
    support: list[dict[str, Any]] = field(default_factory=list)  # Support.to_dict() per answer line
    phrasing: str = ""  # records: how the shown text was worded (the model's phrasing, or why the records' own)
    cache: str = ""  # embedded model: what the asker's own prompt cache was at the call (held/restored/empty/lost)

    def unsupported(self) -> list["Support"]:
        return [s for s in (Support(**d) for d in self.support) if not s.supported]

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


# words that carry no claim of their own: an answer may use them whatever its memories say
FILLER = frozenset("""
a an the i me my mine we our you your it its itself this that these those there here is was were be been being am are
do did does done doing have has had having and or but so because since then than as of to in on at by for from with
into onto about after before when while what which who whom why how not no yes also just only very more most some any
all each both one would could should will can may might must let go went going gone got get gets make made take took
taken try tried chose choose chosen picked want wanted need needed needs thought think knew know say said tell told
there their they them he she his her again still yet now first next last time times way thing things something
""".split())
SUPPORT_COVERAGE = 0.6  # share of a line's content words its cited memories must contain
_TOKEN = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_ID_CITE = re.compile(r"\[([^\]]*)\]")


def _stem(w: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def content_words(text: str) -> list[str]:
    """The words of a sentence that claim something (stemmed, lower case, numbers kept as written)."""
    out: list[str] = []
    for w in _TOKEN.findall(text.lower()):
        if w in FILLER or (len(w) < 3 and not w[0].isdigit()):
            continue
        s = w if w[0].isdigit() else _stem(w)
        if s not in out:
            out.append(s)
    return out


@dataclass
class Support:
    """Does one answer line say only what the memories it cites say? A rule on the words, so a reader can check
    it by eye: every number in the line is in a cited memory, and at least 60% of its content words are."""

    line: str
    cited: list[str]
    supported: bool
    coverage: float = 1.0  # share of the line's content words found in its cited memories
    missing: list[str] = field(default_factory=list)  # content words and numbers they do not contain
    source: str = "memories"  # memories | records (a records answer is true of the records by construction)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        if self.source == "records":
            return "from the step records"
        if not self.cited:
            return "cites no memory that was shown"
        ids = ", ".join(self.cited)
        if self.supported:
            return f"supported by {ids}"
        what = ", ".join(repr(w) for w in self.missing[:4])
        return f"not supported by {ids}: it says {what}, which {'that memory does' if len(self.cited) == 1 else 'those memories do'} not"


def check_support(text: str, memories: Mapping[str, str]) -> list[Support]:
    """Each line of an answer (citations already mapped to ids, as `parse_citations` writes them) against the
    text of the memories it cites."""
    out: list[Support] = []
    for line in (ln.strip() for ln in text.splitlines()):
        if not line:
            continue
        cited = [i.strip() for m in _ID_CITE.findall(line) for i in m.split(",") if i.strip() in memories]
        body = _ID_CITE.sub(" ", line)
        words = content_words(body)
        if not cited:
            out.append(Support(line=line, cited=[], supported=not words, coverage=0.0 if words else 1.0,
                               missing=words))
            continue
        known = set(content_words(" ".join(memories[c] for c in cited)))
        missing = [w for w in words if w not in known]
        coverage = 1.0 - len(missing) / len(words) if words else 1.0
        numbers_ok = not any(w[0].isdigit() for w in missing)
        out.append(Support(line=line, cited=cited, supported=numbers_ok and coverage >= SUPPORT_COVERAGE,
                           coverage=round(coverage, 3), missing=missing))
    return out


ADDED_WORDS_MAX = 2  # content words a phrasing may add to the records' answer ("moved", "then" are filler already)


def _plain(text: str) -> str:
    """Lower case words and numbers, single-spaced: what "keeps a fact" compares ("+10" keeps "10")."""
    return " ".join(re.sub(r"[^a-z0-9.]+", " ", re.sub(r"\.(?!\d)", " ", text.lower())).split())


def phrase_facts(question: str, facts: str, keep: Sequence[str], memory_ids: Sequence[str],
                 generate: Generate | None, *, model: str = "") -> Answer:
    """An answer built from the step records; `generate` (optional) only words it. A phrasing that drops any of
    `keep` (the quoted actions and numbers) is set aside and the records' own sentence is shown."""
    cites = " ".join(f"[{i}]" for i in memory_ids)
    ans = Answer(question=question, memory_ids=list(memory_ids), prompt="", model=model if generate else "",
                 grounding="records", cited=list(memory_ids))
    own = f"{facts} {cites}".strip()
    ans.text, ans.phrasing = own, "the records' own words"
    if generate is not None:
        ans.prompt = load_prompt("phrase").format(question=" ".join(question.split()), facts=facts)
        t0 = time.perf_counter()
        try:
            out = generate(ans.prompt)
            ans.raw = "" if out is None else str(out).strip()
        except Exception as e:  # noqa: BLE001 - the records' sentence stands; the failure is shown
            ans.phrasing = f"the records' own words (the model could not phrase them: {type(e).__name__}: {e})"
        ans.latency_s = time.perf_counter() - t0
        said = f" {_plain(ans.raw)} "
        lost = [k for k in keep if f" {_plain(k)} " not in said]  # whole words: step 2 is not in "step 12"
        allowed = set(content_words(f"{facts} {question}"))
        added = [w for w in content_words(ans.raw) if w not in allowed]
        if ans.raw and not lost and len(added) <= ADDED_WORDS_MAX:
            ans.text, ans.phrasing = f"{' '.join(ans.raw.split())} {cites}".strip(), f"phrased by {model}"
        elif ans.raw and lost:
            ans.phrasing = ("the records' own words (the model's phrasing lost " + ", ".join(repr(k) for k in lost[:3])
                            + ")")
        elif ans.raw:
            ans.phrasing = ("the records' own words (the model's phrasing added " + ", ".join(repr(w) for w in added[:3])
                            + ", which the records do not say)")
    ans.support = [Support(line=ans.text, cited=list(memory_ids), supported=True, source="records").to_dict()]
    return ans


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
        else:
            ans.support = [x.to_dict() for x in check_support(ans.text, {c.id: c.description for c in mems})]
    return ans
