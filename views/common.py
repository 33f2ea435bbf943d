"""Shared by every view: plain-words help texts, actor colours as HTML chips, and what the records say
about the next step (who acts, what is buffered)."""
from __future__ import annotations

import html
import re
from typing import Any

from agent_core.palette import ACTOR_COLORS, ACTOR_LABELS, text_on
from agent_core.trace import EpisodeHeader, StepRecord

# Traces written before EpisodeHeader.mechanisms existed ran the plain SwiftSage loop.
DEFAULT_MECHANISMS: tuple[str, ...] = ("swift", "sage")
SRM_MECHANISMS: dict[str, str] = {"gate1": "Gate-1", "stagnation": "the stagnation detector", "critic": "the Critic"}

QUESTIONS = {
    "Q1": "Which objects are needed, and where are they likely to be?",
    "Q2": "Which of them are not collected yet?",
    "Q3": "Which subgoals complete the task efficiently?",
    "Q4": "Which subgoals are done, and which one to focus on now?",
    "Q5": "Is a mistake blocking progress, and how to fix it?",
}
MAPPING_WORDS = {"exact": "exactly a valid action", "normalized": "valid after rewording (articles, synonyms)",
                 "similarity": "the most similar valid action with the same verb that names the same objects "
                               "(sentence embeddings)",
                 "unmapped": "no valid action with the same verb close enough: skipped"}
WHAT = {
    "page": "What is this? A *dual-process* agent plays a ScienceWorld science task. **Swift** (fast, 'System 1') "
            "is a small model that imitates expert play and proposes each action in a blink. **Sage** (slow, "
            "'System 2') is a large language model that writes a plan and a short list of actions when Swift "
            "looks stuck or is about to make a risky move.",
    "obs": "What is this? The action taken at this step and what the game answered.",
    "look": "What is this? What the agent sees around it after the step ('look around'): the room and its objects.",
    "inv": "What is this? What the agent is carrying after the step.",
    "timeline": "What is this? Who chose each action: one cell per step, coloured by the system that acted. The "
                "rows above it mark events: switches of control, with self-reflection on Gate-1 drops, "
                "stagnation reports and Critic calls, and with episodic memory on its reads (T1, T4) and writes. "
                "Hover a mark for what happened and why.",
    "plan": "What is this? Sage's plan: its answers to five questions about the task, written the last time Sage "
            "was called. Swift ignores it; Sage turns it into actions.",
    "buffer": "What is this? The action buffer is the agent's to-do list: the actions Sage (or the Critic) planned, "
              "taken one per step in order (first in, first out). Each one is first matched to an action the "
              "game accepts.",
    "score": "What is this? The game's score (0-100) after each step. Dots with a number mark steps that earned "
             "(or lost) points; the background shows which system was acting.",
    "steps": "What is this? Every step so far, newest first. Open one to see why it happened, Swift's ranked "
             "candidates, the exact prompts Sage was given and its raw answers, and the full step record.",
    "recorded": "Every live run is recorded as it happens (one JSON line per step). A recorded episode replays "
                "from that file alone: no model is called, so scrubbing is instant.",
    "srm": "What is this? Self-reflection (SRM) watches the agent's own actions: Gate-1 checks each action before "
           "it runs, the stagnation detector notices when the agent goes round in circles, and then a Critic "
           "(an LLM, called only a few times per episode) says what is wrong and proposes new actions.",
    "gate1": "What is this? Gate-1 checks every action proposed to the game (by Swift, Sage, the Critic or a menu "
             "answer) against the actions the game accepts right now, before it runs: it accepts it, repairs a "
             "small mismatch, or drops it so an impossible action never reaches the game.",
    "menu": "What is this? Some actions are ambiguous (two objects share a name), so the game answers with a "
            "numbered menu instead of acting; the agent has to reply with a number.",
    "stagnation": "What is this? The stagnation detector looks back over the last steps for signs that the agent "
                  "is going round in circles (the same observation again, an action repeated with no effect, "
                  "moving back and forth). When one shows, it writes this report, which can call the Critic.",
    "critic": "What is this? The Critic is an LLM asked, when the agent stagnates, to diagnose what is going wrong "
              "and to propose a few actions; they pass Gate-1 and go into the action buffer. It has a small "
              "budget of calls per episode.",
}


def actor_label(system: str) -> str:
    return ACTOR_LABELS.get(system, system)


def actor_color(system: str) -> str:
    return ACTOR_COLORS.get(system, "#7f7f7f")


# ----------------------------------------------------------------------------- text that is not ours
# Every string a page shows that comes from a trace (actions, observations, task names, plans, Critic and Gate-1
# words, memory ids and tags, header fields), from a model (Ask answers) or from a URL query parameter goes
# through one of these before it reaches a sink that renders markdown (st.markdown, st.caption, st.info/...,
# expander/tab/button/widget labels, help texts, radio options, metric labels, st.table cells) or Plotly text:
#   md_text(s)         shows s literally, as one line, in markdown with or without unsafe_allow_html
#   md_code(s)         s as an inline code span that no character of s can end (markdown without HTML)
#   code(s)            s as <code>...</code>, for markdown with unsafe_allow_html
#   model_markdown(s)  a model's answer: bold, lists, headings render; images, links, HTML, math never do
#   html_text(s)       s as HTML text: Plotly hover, legend and tick text
#   html_block_text(s) s inside an HTML block of ours (a body starting <div>), where markdown is not parsed
# Streamlit 1.67 renders markdown with remark (CommonMark + GFM + remark-math + remark-directive for `:red[x]`)
# and, with unsafe_allow_html, rehype-raw. CommonMark lets any ASCII punctuation be backslash-escaped, which shows
# the character itself; `<`, `>` and `&` become entities instead, which show as themselves both in markdown and
# in raw HTML (a backslash does not escape anything inside an HTML block).

_BREAKS = re.compile(r"[ \t]*(?:\r\n|\r|\n)[\s]*")  # a line break with the blanks around it
_MD_ESCAPE = frozenset("\\`*[]$|~")  # always: escapes, code, emphasis, links/images, math, tables, strikethrough
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_LINE_START = re.compile(r"([ ]?)(#|\+|-|=|[0-9]{1,9}(?=[.)]))")  # block markers that only count at a line start


def one_line(text: Any) -> str:
    """Line breaks (and the blanks around them) as one space: how markdown shows a single line break anyway."""
    return _BREAKS.sub(" ", str(text if text is not None else ""))


def md_text(text: Any) -> str:
    """Untrusted text for any markdown sink, shown literally and on one line: no image, link, HTML tag, heading,
    list, code, emphasis, math or `:directive[...]` can come out of it, and a reader sees the same characters
    (backslash escapes and entities are invisible once rendered). Safe inside unsafe_allow_html markdown too, in
    a paragraph or between our own inline tags (<span>, <code>, <small>). Leaves `_` inside a word and `:` before a
    space alone, so 'SAME_OBS_3' and 'Step 3: ...' read the same in the page's source. A bare `http://...` still
    becomes a link (GFM finds those in the text after the escapes are gone): a link, never a fetch."""
    s = one_line(text)
    lead = len(s) - len(s.lstrip(" \t"))
    if lead:  # four blanks would start an indented code block
        s = " " + s[lead:]
    out: list[str] = []
    n = len(s)
    for i, ch in enumerate(s):
        if ch in _MD_ESCAPE:
            out.append("\\" + ch)
        elif ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch == "_":  # emphasis needs a `_` at a word's edge; inside a word it is a plain character
            inner = 0 < i < n - 1 and s[i - 1].isalnum() and s[i + 1].isalnum()
            out.append("_" if inner else "\\_")
        elif ch == ":" and i + 1 < n and s[i + 1].isalpha():
            out.append("\\:")  # `:red[x]`, `::name`: directives
        else:
            out.append(ch)
    body = "".join(out)
    m = _LINE_START.match(body)  # `# x`, `- x`, `+ x`, `===`, `1. x` at the start of a line
    if m:
        if m.group(2)[0].isdigit():
            end = m.end()
            body = body[:end] + "\\" + body[end:]
        else:
            body = body[:m.start(2)] + "\\" + body[m.start(2):]
    return body


def md_code(text: Any) -> str:
    """Untrusted text as an inline code span for markdown without HTML: the fence is one backtick longer than
    the longest run of backticks inside, line breaks become spaces (a blank line would end the paragraph before
    the span), and the text shows exactly (a padding space is added where CommonMark strips one)."""
    s = one_line(text)
    if not s:
        return "` `"
    fence = "`" * (max((len(r) for r in re.findall(r"`+", s)), default=0) + 1)
    if s[0] == "`" or s[-1] == "`" or (s[0] == " " and s[-1] == " " and s.strip()):
        s = f" {s} "
    return f"{fence}{s}{fence}"


def model_markdown(text: Any) -> str:
    """A model's answer (Ask the agent) as markdown: emphasis, headings, lists and quotes render; images, links,
    reference definitions, raw HTML, code spans, math, tables and directives do not (their characters show as
    typed). Line breaks are kept. For markdown without unsafe_allow_html."""
    s = str(text if text is not None else "").replace("\r\n", "\n").replace("\r", "\n")
    out: list[str] = []
    n = len(s)
    for i, ch in enumerate(s):
        if ch in "\\`[]$|":
            out.append("\\" + ch)
        elif ch in "<&":
            out.append(_ENTITIES[ch])
        elif ch == ":" and i + 1 < n and s[i + 1].isalpha():
            out.append("\\:")
        else:
            out.append(ch)
    return "".join(out)


def html_text(text: Any, quote: bool = False) -> str:
    """Untrusted text as HTML text on one line: for Plotly's hover, legend and tick labels (which render <b>, <br>,
    <a href>, <span style>); on one line, so inside an HTML block no blank line can end the block (there take
    html_block_text). quote=True for an attribute value."""
    return html.escape(one_line(text), quote=quote)


_BLOCK_ENTITIES = {"[": "&#91;", "]": "&#93;", "`": "&#96;", "$": "&#36;", "\\": "&#92;"}


def html_block_text(text: Any) -> str:
    """html_text for the inside of an HTML block of our own (a markdown body that starts with <div>): markdown is
    not parsed there, and `[`, `]`, backticks, `$` and backslashes are numeric entities besides, so even outside
    the block no link, image, code or math could form (an entity is a literal character in markdown too)."""
    return "".join(_BLOCK_ENTITIES.get(ch, ch) for ch in html_text(text))


def chip(text: str, color: str) -> str:
    """A small coloured pill for st.markdown(..., unsafe_allow_html=True); `color` is ours (a palette entry)."""
    return (f"<span style='background:{color};color:{text_on(color)};padding:1px 8px;border-radius:9px;font-size:0.85em;"
            f"font-weight:600;white-space:nowrap'>{esc(text)}</span>")


def badge(system: str) -> str:
    """The actor's name in its colour (the mode badge); an unknown system's name is the trace's, so escaped."""
    return (f"<span style='background:{actor_color(system)};color:{text_on(actor_color(system))};padding:2px 10px;border-radius:10px;"
            f"font-weight:600;white-space:nowrap'>{esc(actor_label(system))}</span>")


def esc(text: Any) -> str:
    """Text for markdown that allows HTML (and any other markdown): md_text."""
    return md_text(text)


def code(text: str) -> str:
    """Inline code that survives any characters, for markdown with unsafe_allow_html (a backtick in an action
    would break `...`); markdown without HTML takes md_code."""
    return f"<code>{esc(text)}</code>"


def clip(text: str, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def episode_mechanisms(header: EpisodeHeader) -> list[str]:
    """What ran in this episode; old traces (no list) ran Swift + Sage only."""
    return list(header.mechanisms) or list(DEFAULT_MECHANISMS)


def record_at(records: list[StepRecord], t: int) -> StepRecord | None:
    """The record of step t (1-based); None at the start state."""
    return records[t - 1] if 0 < t <= len(records) else None


def pending_actions(records: list[StepRecord]) -> list[tuple[str, str]]:
    """(action, source) pairs the buffer will run next, next first; empty when Swift acts next.

    Read from the last record (mode_after, buffer_after), never from the agent. A non-empty buffer_after
    also counts: mode_after is "sage" exactly while the buffer has actions, and records written before
    mode_after existed leave it at its default."""
    if not records:
        return []  # before the first step, Swift acts
    last = records[-1]
    if last.after is not None:  # the state digest (schema 2) holds the buffer exactly
        return list(zip(last.after.buffer, last.after.buffer_sources))
    if last.mode_after != "sage" and not last.buffer_after:
        return []
    return list(zip(last.buffer_after, buffer_sources(last)))


def buffer_sources(rec: StepRecord) -> list[str]:
    """Who wrote each pending buffer item (sage | critic); Sage when the record does not say."""
    given = list(rec.buffer_after_sources)
    return (given + ["sage"] * len(rec.buffer_after))[: len(rec.buffer_after)]


def next_hint(records: list[StepRecord], done: bool) -> str | None:
    """One line: who acts at the next step."""
    if done:
        return None
    pending = pending_actions(records)
    if pending:
        by_critic = pending[0][1] == "critic"
        owner = "the Critic's actions in the buffer" if by_critic else "Sage's buffer"
        return f"Next step: {owner} ({plural(len(pending), 'action')} pending)."
    return "Next step: Swift proposes; Sage takes over if a switching rule fires."


DECISION_LABELS = {  # kind -> short label (agent_core.decisions)
    "safeguard": "safeguard", "unnamed_focus_refused": "unnamed focus refused", "buffer_drop": "buffer drop",
    "buffer_fail_limit": "buffer fail limit", "sage_pick": "Sage's pick", "sage_problem": "Sage's answer",
    "sage_fallback": "Sage gave nothing", "focus_review": "focus review", "loop_guard": "loop guard",
    "unsure_focus_replaced": "unsure focus replaced", "deferred_focus": "focus deferred",
    "focus_margin": "focus margin", "nothing_admissible": "nothing admissible", "admissible_rerank": "admissible rerank",
    "swift_forced": "Swift forced",
    "t1_retry": "AMM T1 retry", "critic_waiting": "Critic waiting", "option_scores": "Sage's scores", "note": "note"}


def decision_rows(rec: StepRecord) -> list[tuple[str, str]]:
    """(label, sentence) for each typed decision of a step, in the order they were taken."""
    return [(DECISION_LABELS.get(d.kind, d.kind), d.describe()) for d in rec.decisions]

