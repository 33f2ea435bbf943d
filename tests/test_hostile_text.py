"""Text that is not ours cannot inject markup or make a student's browser fetch anything.

Every free-text field of a trace (actions, observations, plans, buffers, Gate-1, the Critic, memory writes and
retrievals, decisions, the header's task, run id, preset, models, code), a model's answer and a URL query value is
shown through the helpers of views/common.py (md_text, md_code, code, model_markdown, html_text). Here:

- `hostile_trace(path, texts)` writes a copy of a shipped trace whose every free-text field holds one of `texts`
  (importable by other tests; `hostile_texts(port)` gives the fixed fragments, pointing at a listener's port);
- a hypothesis test renders the Run page (several steps, the step list), the Compare page, the Memory explorer and
  the Ask page on such a trace with AppTest and walks every element's protobuf: no markdown image, link, reference
  definition, math or directive can come out of a markdown body, label, help or radio option; an unsafe_allow_html
  body holds only our own tags (span, code, br, div, small), our style/class attributes and no
  `on*`, `src` or `href`; Plotly text holds no tag but <b> and <br>; st.table cells are markdown too;
- in Chromium, the Run page steps through the whole hostile episode and the offline HTML export does too, while a
  loopback listener stands in for an attacker: no request reaches it, `window.__pwned` stays undefined and no
  <img>, <script> or <iframe> points at it.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Iterator
from urllib.parse import quote

import pytest

from tests.llm_server import Listener

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assets" / "episodes" / "inclined-plane-friction-named-surfaces-v1038-full.jsonl"
NO_LISTENER = 9  # the discard port: nothing listens there (AppTest renders no browser anyway)


# ----------------------------------------------------------------------------- the hostile trace

def hostile_texts(port: int = NO_LISTENER) -> list[str]:
    """Strings a trace, a model or a link could carry to attack the page: markup, images that fetch from
    127.0.0.1:port, script, style, frames, javascript: links, KaTeX, Streamlit's directives, entities, backticks."""
    u = f"http://127.0.0.1:{port}"
    return [
        f"![p]({u}/pwn.png)",
        f"see [x]\n\n[x]: {u}/ref.png\n\n![p][x] and ![q][x]",
        "<script>window.__pwned=1</script>",
        '<img src=x onerror="window.__pwned=1">',
        f'<img src="{u}/pwn.png">',
        f"<style>body{{background:url({u}/css.png)}}</style>",
        f'<iframe src="{u}/frame.html"></iframe>',
        f'<svg><image href="{u}/svg.png"/></svg>',
        f'<span style="fill:url({u}/fill.png#a)">plotly span</span> <a href="{u}/a">a</a>',
        "[click me](javascript:window.__pwned=1) <a href=\"javascript:window.__pwned=1\">js</a>",
        f"$\\href{{{u}/katex}}{{k}}$ $$\\includegraphics{{{u}/g.png}}$$",
        ":red[red text] :blue-background[x] :material/home: :streamlit:",
        "&amp; &lt;img src=x&gt; &#60;b&#62; &quot;",
        "` a backtick, ``two``, ```three``` and `` ` `` in code",
        "```\ncode fence\n```",
        "L" * 3000 + f" a long line ![long]({u}/long.png)",
        f"first line\n# a header\n\n- a list item\n1. numbered\n> quote\n\n    indented\n![nl]({u}/nl.png)",
        f"<{u}/autolink.png> and {u}/bare.png",
        "| a | b |\n|---|---|\n| ![t](" + u + "/table.png) | x |",
        "**bold** _em_ ~~strike~~ <b>b</b><br>",
        "\\![escaped?](" + u + "/backslash.png) \\\\",
    ]


def hostile_trace(path: str | Path, texts: Iterable[str], source: Path = SOURCE) -> Path:
    """Write to `path` a copy of the shipped trace `source` (the Full preset: Gate-1, stagnation, the Critic, memory
    writes and retrievals, Sage's plans and decisions) whose every free-text field holds one of `texts`, in turn.
    The values the app's logic branches on stay as they were (kinds, decisions, purposes, numbers, the buffer's
    sources), so the copy is a valid trace (read_episode reads it) that exercises every panel; a menu, a mapping and
    an environment event are added. Returns the path."""
    pool = [t for t in texts if isinstance(t, str)] or hostile_texts()
    it = itertools.cycle(pool)
    h = lambda: next(it)  # noqa: E731
    out = []
    for n, line in enumerate(source.read_text(encoding="utf-8").splitlines()):
        rec = json.loads(line)
        kind = rec.get("kind")
        if kind == "header":
            _hostile_header(rec, h)
        elif kind == "step":
            _hostile_step(rec, h)
        elif kind == "summary":
            rec["reason"], rec["error"] = h(), h()
        out.append(json.dumps(rec, ensure_ascii=True))  # ASCII: no raw U+2028 or CR inside a line of the file
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    from agent_core.trace import read_episode

    ep = read_episode(path)  # a valid trace, every line readable
    assert not ep.problems and ep.truncated_tail is None and len(ep.steps) == sum(1 for x in out if '"step"' in x[:20])
    return path


def _hostile_header(rec: dict, h) -> None:
    for key in ("task", "task_description", "run_id", "config_hash", "initial_observation", "initial_look",
                "initial_inventory", "memory_store"):
        rec[key] = h()
    cfg = rec.setdefault("config", {})
    cfg["preset"] = h()
    ctl = cfg.setdefault("controller", {})
    ctl["critical_prefixes"], ctl["unexpected_markers"] = [h()], [h(), h()]
    if "srm" in cfg:
        cfg["srm"]["critic_buffer_policy"] = h()
    rec["models"] = {"swift": h(), "sage": h()}
    rec["code"] = {"commit": h(), "modified": True, "source": h()}
    rec["machine"] = {"cpu": h(), "isa": h(), "cores": 2}
    rec["mechanisms"] = list(rec.get("mechanisms") or []) + [h()]
    rec["memory_at_start"] = {"memories": h(), "clock": 0.0, "seeded_from": h()}
    rec["parent"] = {"trace": h(), "run_id": h(), "step": 2, "preset": h()}


def _hostile_step(rec: dict, h) -> None:
    step = rec["step"]
    for key in ("action", "observation", "look", "inventory", "room"):
        rec[key] = h()
    if step % 7 == 2 and rec.get("system") == "swift":  # an actor no palette has (steps 2, 9, ..., 30): its name
        rec["system"] = h()                             # is the trace's, on the mode badge and the timeline
    rec["swift_top1"] = h()
    for key in ("swift_candidates", "swift_valid_ranked"):
        for c in rec.get(key) or []:
            c["action"] = h()
    rec["swift_focus_unnamed"], rec["sage_focus_unnamed"] = [h(), h()], [h()]
    rec["plan"] = {q: h() for q in rec.get("plan") or {}}
    rec["buffer_before"] = [h() for _ in rec.get("buffer_before") or []]
    rec["buffer_after"] = [h() for _ in rec.get("buffer_after") or []]
    if rec.get("after"):
        rec["after"]["buffer"] = list(rec["buffer_after"])  # the pending list is read from the state digest
        rec["after"]["avoid"] = [h() for _ in rec["after"].get("avoid") or []]
    rec["mappings"] = [{"raw": h(), "mapped": h(), "method": h(), "similarity": 0.5, "reason": h()}]
    for i, g in enumerate(rec.get("gate1") or []):
        for key in ("proposed", "reason", "normalized", "detail"):
            g[key] = h()
        if g.get("result") is not None:
            g["result"] = h()
        if i == 1:  # a source and a decision no rule has (the export writes the decision into a class attribute)
            g["source"], g["decision"] = h(), h()
    if rec.get("trigger"):
        t = rec["trigger"]
        t["rule"] = h()
        if step % 2:  # a name no rule has: shown as recorded
            t["name"] = h()
        ev = t.setdefault("evidence", {})
        ev["swift_top1"], ev["set_aside"] = h(), [h()]
    if rec.get("critic"):
        c = rec["critic"]
        for key in ("reason", "diagnosis", "course_correction", "prompt", "output", "buffer_policy", "error"):
            c[key] = h()
        c["actions"] = [h(), h()]
        c["admitted"] = c["actions"][:1]
        c["problems"] = [h()]
    if rec.get("stagnation"):
        s = rec["stagnation"]
        s["modes"] = [h()]
        s["counts"] = {s["modes"][0]: 2}
        s["explanation"], s["constraints"], s["actions_to_avoid"] = [h()], [h()], [h()]
        s["last_action"], s["observation_signature"] = h(), h()
    for w in rec.get("memories_written") or []:
        for key in ("id", "tag", "why", "text", "importance_source", "rule", "content_key"):
            w[key] = h()
    for j, x in enumerate(rec.get("retrievals") or []):
        for key in ("why", "query", "outcome", "injected_text", "subject"):
            x[key] = h()
        if x.get("trigger") not in ("T1", "T4"):  # T1 and T4 place the timeline's marks; any other is shown as is
            x["trigger"] = h()
        if x.get("injected_into"):
            x["injected_into"] = h()
        res = x.get("result")
        if res:
            ids = {c["id"]: f"{h()} #{step}.{j}.{k}" for k, c in enumerate(res.get("candidates") or [])}
            for c in res.get("candidates") or []:
                c["id"] = ids[c["id"]]
                for key in ("description", "tag", "task", "episode"):
                    c[key] = h()
            res["top_ids"] = [ids.get(i, i) for i in res.get("top_ids") or []]
            x["injected_ids"] = [ids.get(i, i) for i in x.get("injected_ids") or []]
            res["query"], res["trigger"], res["method"] = h(), h(), h()
            res["filters"] = {"task": [h()]}
    for i, c in enumerate(rec.get("llm_calls") or []):
        for key in ("model", "backend", "prompt", "output"):
            c[key] = h()
        if i == 0 and step % 3 == 0:
            c["error"], c["error_kind"] = h(), "llm"
    for d in rec.get("decisions") or []:
        for key in ("action", "detail", "reason", "text", "replaced", "retry", "error"):
            if isinstance(d.get(key), str):
                d[key] = h()
        if isinstance(d.get("options"), list):
            d["options"] = [h() for _ in d["options"]]
        if isinstance(d.get("set_aside"), list):
            d["set_aside"] = [h() for _ in d["set_aside"]]
    rec["env_events"] = [{"kind": h(), "detail": h(), "at_s": 0.0}]
    rec["timings"] = {**(rec.get("timings") or {}), h(): 0.1}
    rec["notes"] = [h()]
    if step == 2:  # the game's numbered menu, answered
        rec["menu"] = {"request": h(), "options": [h(), h()], "chosen": 1, "chooser": h(), "why": h()}


# ----------------------------------------------------------------------------- what a page may render

_TAG = re.compile(r"<\s*(/?)\s*([A-Za-z][A-Za-z0-9-]*)([^>]*)>")
_ATTR = re.compile(r"""([^\s=/]+)\s*(?:=\s*("[^"]*"|'[^']*'|[^\s>]+))?""")
HTML_TAGS = {"span", "code", "br", "div", "small"}  # what the app itself writes in unsafe_allow_html markdown
PLOTLY_TAGS = {"b", "br", "extra"}  # <extra></extra>: our hovertemplates hide the trace name


def _unescaped(text: str) -> list[tuple[int, str]]:
    """(position, character) of every character that is not backslash-escaped (CommonMark: a backslash escapes
    the ASCII punctuation after it)."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~":
            i += 2
            continue
        out.append((i, ch))
        i += 1
    return out


def strip_code_spans(text: str) -> str:
    """The text without its inline code spans (whose content markdown shows literally): a backtick run opens one
    that the next run of the same length closes, within a paragraph; backslashes do not escape inside it."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            out.append(text[i:i + 2])
            i += 2
            continue
        if ch == "`":
            j = i
            while j < n and text[j] == "`":
                j += 1
            run, k, close = j - i, j, -1
            while k < n:
                if text[k] == "`":
                    m = k
                    while m < n and text[m] == "`":
                        m += 1
                    if m - k == run:
                        close = k
                        break
                    k = m
                else:
                    k += 1
            if close >= 0 and not re.search(r"\n[ \t]*\n", text[j:close]):
                out.append(" ")
                i = close + run
                continue
            out.append(text[i:j])
            i = j
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def markdown_problems(text: str, allow_html: bool = False) -> list[str]:
    """What in a markdown source could render as markup from text that is not ours: an image or a link, a reference
    definition, math, a `:directive[...]`, and (without HTML) any raw tag; with unsafe_allow_html, a tag or an
    attribute the app does not write itself."""
    problems = []
    body = text if allow_html else strip_code_spans(text)  # no hostile text may sit in a code span with HTML on
    chars = _unescaped(body)
    plain = {i: ch for i, ch in chars}
    for i, ch in chars:
        nxt = plain.get(i + 1)
        if ch == "!" and nxt == "[":
            problems.append(f"an image at {i}: {body[i:i + 60]!r}")
        elif ch == "]" and nxt in ("(", "["):
            problems.append(f"a link or reference at {i}: {body[max(0, i - 30):i + 40]!r}")
        elif ch == "$":
            problems.append(f"math at {i}: {body[i:i + 40]!r}")
        elif ch == "`" and allow_html:  # with HTML on, text that is not ours goes into <code>, never a code span
            problems.append(f"a backtick in HTML markdown at {i}: {body[max(0, i - 30):i + 30]!r}")
        elif ch == ":" and re.match(r":[A-Za-z][\w-]*\[", body[i:]) and plain.get(i + 1 + len(
                re.match(r":([A-Za-z][\w-]*)", body[i:]).group(1))) == "[":
            problems.append(f"a directive at {i}: {body[i:i + 40]!r}")
        elif ch == "<":
            m = _TAG.match(body, i)
            if not m and re.match(r"<[A-Za-z][\w+.-]*:", body[i:]):
                problems.append(f"an autolink at {i}: {body[i:i + 60]!r}")
            if not m:
                continue
            if not allow_html:
                problems.append(f"raw HTML at {i}: {m.group(0)[:80]!r}")
                continue
            name, attrs = m.group(2).lower(), m.group(3)
            if name not in HTML_TAGS:
                problems.append(f"a <{name}> tag: {m.group(0)[:80]!r}")
            for a, v in _ATTR.findall(attrs):
                a = a.lower()
                if a not in ("style", "class"):
                    problems.append(f"attribute {a} in {m.group(0)[:80]!r}")
                elif re.search(r"url\s*\(|expression|javascript|@import", v, re.I):
                    problems.append(f"a style that fetches: {m.group(0)[:80]!r}")
    for line in body.splitlines():
        m = re.match(r" {0,3}\[([^\]]*)\]:", line)
        if m and not line.lstrip().startswith("\\["):
            problems.append(f"a reference definition: {line[:80]!r}")
    return problems


def plotly_problems(spec: str) -> list[str]:
    """Tags in a Plotly figure's text (hover, legend, ticks, annotations), which Plotly renders as HTML."""
    out = []

    def walk(v, where):
        if isinstance(v, str):
            for m in _TAG.finditer(v):
                if m.group(2).lower() not in PLOTLY_TAGS or m.group(3).strip():
                    out.append(f"{where}: {m.group(0)[:80]!r}")
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{where}.{k}")
        elif isinstance(v, list):
            for x in v:
                walk(x, where)

    walk(json.loads(spec), "figure")
    return out


MARKDOWN_FIELDS = ("body", "label", "help", "delta")  # rendered with Streamlit's markdown wherever they appear
MARKDOWN_OPTIONS = {"Radio", "Slider", "ButtonGroup"}  # widgets whose options are markdown too
PLAIN = {"Code", "Text", "Json", "Exception", "Empty", "Dataframe", "Arrow", "PlotlyChart", "ChatInput"}


def page_problems(at) -> tuple[list[str], list[str]]:
    """(problems, every text checked) for every element AppTest holds: markdown bodies (with allow_html), labels,
    help texts, radio and slider options, metric texts, table cells, Plotly figures."""
    problems, seen = [], []

    def check(text: str, where: str, allow_html: bool = False) -> None:
        if text:
            seen.append(text)
            problems.extend(f"{where}: {p}" for p in markdown_problems(text, allow_html))

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        kind = type(proto).__name__ if proto is not None else ""
        if kind == "PlotlyChart":
            seen.append(proto.spec)
            problems.extend(plotly_problems(proto.spec))
        elif proto is not None and kind not in PLAIN and hasattr(proto, "ListFields"):
            html_ok = kind == "Markdown" and getattr(proto, "allow_html", False)
            for field, value in proto.ListFields():
                if field.name in MARKDOWN_FIELDS and isinstance(value, str):
                    check(value, f"{kind}.{field.name}", html_ok and field.name == "body")
                elif field.name in ("options", "captions") and kind in MARKDOWN_OPTIONS:
                    for v in value:
                        check(str(v), f"{kind}.{field.name}")
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    for table in at.table:  # st.table renders every cell (and header) as markdown
        frame = table.value
        for col in frame.columns:
            check(str(col), "Table.header")
            for v in frame[col]:
                check(str(v), "Table.cell")
    return problems, seen


def _assert_clean(at, where: str) -> list[str]:
    assert not at.exception, f"{where}: {at.exception}"
    problems, seen = page_problems(at)
    assert not problems, f"{where}: {len(problems)} unescaped: " + "\n".join(problems[:15])
    return seen


# ----------------------------------------------------------------------------- the helpers themselves

def test_helpers_show_hostile_text_literally():
    from views.common import code, html_text, md_code, md_text, model_markdown

    for text in hostile_texts():
        for shown in (md_text(text), md_code(text), "x " + md_text(text), f"- {md_text(text)}"):
            assert not markdown_problems(shown), (text, shown)
        assert not markdown_problems(f"<span style='color:#000'>{md_text(text)}</span> {code(text)}", True), text
        assert not markdown_problems(model_markdown(text)), text
        assert "\n" not in md_text(text) and "\n" not in md_code(text)
        assert "<" not in html_text(text) and "\n" not in html_text(text)
    assert md_text("SAME_OBS_3: look at 'box' (2)") == "SAME_OBS_3: look at 'box' (2)"  # reads the same
    assert md_code("a`b") == "``a`b``" and md_code("`x`") == "`` `x` ``" and md_code("look around") == "`look around`"
    assert md_text("# 1. - x") == "\\# 1. - x" and md_text("1. x") == "1\\. x" and md_text("- x") == "\\- x"
    assert model_markdown("**bold** [m1] ![i](u)") == "**bold** \\[m1\\] !\\[i\\](u)"


def test_export_keeps_every_string_inside_its_script(tmp_path):
    """`</script>`, `<!--` and a placeholder's name in a trace cannot end the export's inline script or be
    replaced by the template."""
    from views.export import export_episode

    trace = hostile_trace(tmp_path / "runs" / "hostile.jsonl",
                          hostile_texts() + ["</script><script>window.__pwned=1</script>", "<!--<script>",
                                             "__FIG__ __DATA__ __PLOTLY__ __TITLE__"])
    html = export_episode(trace, tmp_path / "out.html").read_text(encoding="utf-8")
    data = html.split("const D = ", 1)[1].split(";\nconst FIG", 1)[0]
    assert "<" not in data and "__FIG__" in data  # every < escaped; a placeholder in the data is left as text
    assert html.count("<script>") == 2 and html.count("</script>") == 2  # Plotly's and the page's own
    assert "window.__pwned" not in html.split("<title>")[1].split("</title>")[0]


# ----------------------------------------------------------------------------- every page, with hypothesis

def _fragments():
    from hypothesis import strategies as st

    any_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
    fixed = st.sampled_from(hostile_texts())
    return st.lists(st.one_of(fixed, any_text, st.tuples(fixed, any_text, fixed).map(" ".join)),
                    min_size=4, max_size=10)


def _hostile_model(answer: str):
    """The Ask page's model: an OpenAI-compatible endpoint on 127.0.0.1 that answers with hostile text."""
    from tests.llm_server import BadServer

    model = BadServer()
    model.mode, model.reply = "reply", answer
    return model


def _render_every_page(tmp_path: Path, monkeypatch, texts: list[str], n: int) -> list[str]:
    from streamlit.testing.v1 import AppTest

    from agent_core.trace import read_episode

    texts = (list(texts) * 7)[: max(7, len(texts))]  # every sink below takes one of the first seven
    runs = tmp_path / f"runs{n}"
    trace = hostile_trace(runs / f"hostile-{n}.jsonl", texts)
    ep = read_episode(trace)
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    monkeypatch.setenv("SWIFTSAGE_MEMORY_DIR", str(tmp_path / "no-store"))
    seen: list[str] = []

    # the Run page: the start, the menu (and an actor no palette has), the Critic's step (the step list holds steps
    # 1-10 in full), Sage's plan and buffer, the last step (steps 11-30 in the list); a link with a hostile step value
    run = AppTest.from_file(str(ROOT / "pages" / "0_Run.py"), default_timeout=120)
    run.query_params["trace"] = str(trace)
    run.query_params["step"] = texts[0][:30] or "x"
    run.run()
    seen += _assert_clean(run, "Run page, step 0")
    for t in (2, 10, 13, len(ep.steps)):
        run.slider(key="run_rec_step").set_value(t).run()
        seen += _assert_clean(run, f"Run page, step {t}")
    bad_link = AppTest.from_file(str(ROOT / "pages" / "0_Run.py"), default_timeout=120)
    bad_link.query_params["trace"] = texts[1]
    bad_link.run()
    seen += _assert_clean(bad_link, "Run page, a link naming no trace")

    # Compare: the hostile episode against the shipped one it was made from, at the first step (they differ there)
    cmp = AppTest.from_file(str(ROOT / "pages" / "5_Compare.py"), default_timeout=120)
    cmp.query_params["a"], cmp.query_params["b"], cmp.query_params["step"] = str(trace), str(SOURCE), "10"
    cmp.run()
    seen += _assert_clean(cmp, "Compare page")
    cmp_bad = AppTest.from_file(str(ROOT / "pages" / "5_Compare.py"), default_timeout=120)
    cmp_bad.query_params["a"] = texts[2]
    cmp_bad.run()
    seen += _assert_clean(cmp_bad, "Compare page, a link naming no trace")

    # the Memory explorer: no store, so it shows the retrievals recorded in traces; the hostile trace's retrieval,
    # and one opened from the Run page ("Open in the Memory explorer") with a hostile label and store
    from views.stores import short_path

    retrieval = next(x for r in ep.steps for x in r.retrievals if x.result is not None and x.result.candidates)
    mem = AppTest.from_file(str(ROOT / "pages" / "2_Memory.py"), default_timeout=120)
    mem.session_state["mem_open_request"] = {"store": texts[3], "result": retrieval.result.to_dict(),
                                             "label": texts[4]}
    mem.session_state["mem_trace_file"] = short_path(str(trace))
    mem.run()
    seen += _assert_clean(mem, "Memory explorer")
    assert any(s.label == "Recorded retrieval" for s in mem.selectbox), "the trace's retrievals are listed"

    # Ask the agent: a question the records answer (phrased by the model) and one the memories answer, with a
    # model that answers in hostile text
    model = _hostile_model(" ".join(texts[:6]) + " [1] [9]")
    try:
        ask = AppTest.from_file(str(ROOT / "pages" / "6_Ask.py"), default_timeout=300)
        ask.query_params["trace"] = str(trace)
        ask.session_state["ask_backend"], ask.session_state["ask_url"] = "openai", model.base_url
        ask.session_state["ask_model"] = texts[5]
        ask.run()
        seen += _assert_clean(ask, "Ask page")
        suggested = [b for b in ask.button if b.key and b.key.startswith("ask_suggest_")]
        if suggested:
            suggested[0].click()
            ask.run()
            seen += _assert_clean(ask, "Ask page, a suggested question")
        ask.chat_input(key="ask_input").set_value(texts[6 % len(texts)] or "why?")
        ask.run()
        seen += _assert_clean(ask, "Ask page, a free question")
        assert len(ask.session_state["ask_history"]) >= 1
    finally:
        model.stop()
    return seen


@pytest.mark.page
@pytest.mark.model  # the Ask page embeds the episode's memories (MiniLM)
def test_every_page_escapes_hostile_trace_text(tmp_path, monkeypatch):
    from hypothesis import HealthCheck, given, settings

    runs = itertools.count()
    started = time.monotonic()

    @settings(max_examples=4, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(texts=_fragments())
    def check(texts):
        seen = _render_every_page(tmp_path, monkeypatch, texts, next(runs))
        shown = "\n".join(seen)
        assert "pwn" in shown or any(t.strip() and t[:8] in shown for t in texts)  # hostile text reached the sinks

    check()
    # and once with every fixed fragment, so each reaches a field whatever hypothesis drew
    seen = "\n".join(_render_every_page(tmp_path, monkeypatch, hostile_texts(), next(runs)))
    assert "pwn.png" in seen and "pwned" in seen and "katex" in seen
    assert time.monotonic() - started < 240


# ----------------------------------------------------------------------------- in Chromium

@contextlib.contextmanager
def _listener() -> Iterator[Listener]:
    lis = Listener()
    try:
        yield lis
    finally:
        lis.stop()


PWN_JS = """(port) => {
  const frames = [document, ...[...document.querySelectorAll('iframe')].map(f => { try { return f.contentDocument }
                  catch (e) { return null } }).filter(Boolean)];
  const bad = [];
  for (const doc of frames) {
    for (const el of doc.querySelectorAll('img, script, iframe, source, video, audio, embed, object, image, link')) {
      const src = el.getAttribute('src') || el.getAttribute('href') || el.getAttribute('data') ||
                  el.getAttribute('xlink:href') || '';
      // a script of its own (the export's data holds the hostile strings as JSON text, which is not one)
      const injected = el.tagName === 'SCRIPT' && /^\s*window\.__pwned\s*=/.test(el.textContent || '');
      if (src.includes(':' + port) || injected)
        bad.push(el.outerHTML.slice(0, 200));
    }
  }
  return {pwned: typeof window.__pwned, bad};
}"""


def _check_browser(page, lis: Listener, requests: list[str], allowed: tuple[str, ...], where: str) -> None:
    state = page.evaluate(PWN_JS, lis.port)
    assert state["pwned"] == "undefined", f"{where}: a script ran"
    assert not state["bad"], f"{where}: elements point at the listener: {state['bad']}"
    assert not lis.requests, f"{where}: the listener was asked: {lis.requests}"
    strays = [u for u in requests if not u.startswith(allowed)]
    assert not strays, f"{where}: requests beyond the app: {strays[:10]}"


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.server
def test_hostile_trace_fetches_nothing_in_chromium(tmp_path):
    from tests.browser_util import CHROMIUM, chromium_page, served_app, wait_for_step, wait_idle

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (bash scripts/setup.sh --tests installs it)")
    from agent_core.trace import read_episode

    runs = tmp_path / "runs"
    with _listener() as lis:
        trace = hostile_trace(runs / "hostile.jsonl", hostile_texts(lis.port))
        n = len(read_episode(trace).steps)
        out = tmp_path / "hostile.html"
        subprocess.run([sys.executable, "-m", "views.export", str(trace), str(out)], cwd=ROOT, check=True,
                       capture_output=True, timeout=120)
        with served_app(runs, tmp_path / "server.log", env={"SWIFTSAGE_MEMORY_DIR": str(tmp_path / "no-store")}) \
                as url, chromium_page() as page:
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{url}/?trace={quote(str(trace))}")
            wait_for_step(page, 0, 120)
            wait_idle(page, 60)
            allowed = (url, "data:", "blob:", "about:")
            _check_browser(page, lis, requests, allowed, "Run page, step 0")
            side = page.get_by_test_id("stSidebar")
            for t in range(1, n + 1):  # every step, by the sidebar's Next button
                side.get_by_role("button", name="Next ▶").click()
                wait_for_step(page, t, 60)
                if t in (2, 10, 13, n):
                    wait_idle(page, 60)
                    _check_browser(page, lis, requests, allowed, f"Run page, step {t}")
            wait_idle(page, 60)
            # the step list (steps n-19..n): open every expander; the narration's text track too
            for box in page.get_by_test_id("stExpander").locator("summary").all():
                with contextlib.suppress(Exception):
                    box.click(timeout=2000)
            wait_idle(page, 60)
            page.wait_for_timeout(1500)
            _check_browser(page, lis, requests, allowed, "Run page, every expander open")
            body = page.get_by_test_id("stMain").inner_text()
            assert "pwn.png" in body and "Traceback" not in body  # the hostile text is there, as text

        # the offline export, from disk: every step by the keys
        with chromium_page() as page:
            requests = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(out.as_uri())
            page.locator("#score .main-svg").first.wait_for(timeout=30_000)
            for t in range(1, n + 1):
                page.keyboard.press("ArrowRight")
                assert page.inner_text("#pos") == f"step {t} of {n}"
                if t in (2, 10, 13, n):
                    page.wait_for_timeout(300)
                    _check_browser(page, lis, requests, ("file://", "data:", "blob:", "about:"), f"export, step {t}")
            page.wait_for_timeout(1000)
            _check_browser(page, lis, requests, ("file://", "data:", "blob:", "about:"), "export, the end")
            assert "pwn.png" in page.inner_text("body")
