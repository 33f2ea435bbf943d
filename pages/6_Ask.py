"""Ask the agent: a student's question is answered from the agent's memory stream, as in Generative Agents.

The question retrieves memories by recency, importance and relevance (the breakdown of each is shown at once),
then the chosen LLM answers from them and cites them; the citations are mapped to memory ids, and each answer
line is checked against the memories it cites (a line they do not back is flagged). A question the step records
answer exactly (who acted at step k and why, what Gate-1 dropped, which memory won) is answered from the records
(views/ask_records.py) and the model only phrases it. Ask about a recorded episode (every step becomes a memory, with the reason the step record gives: views/ask.py) or about a
memory store the agent wrote (AMM). Asking never changes the agent's memory (last access is not updated).
`?trace=PATH` opens an episode (the Run page links here). Works standalone (AppTest.from_file) too.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # standalone runs (AppTest) start with pages/ as the script dir
    sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from agent_core.config import LLMConfig  # noqa: E402
from agent_core.llm.embedded import MODELS as EMBEDDED_MODELS  # noqa: E402
from agent_core.trace import TraceError, list_traces  # noqa: E402
from memory_store import MemoryConfig, RetrievalResult, open_stream  # noqa: E402
from memory_store.charts import breakdown_figure  # noqa: E402
from memory_store.interview import (ANSWER_MAX_TOKENS, STOP, Answer, answer_question,  # noqa: E402
                                    phrase_facts, retrieve_for_question, top_candidates)
from session.llm import DEFAULT_EMBEDDED, llm_backend  # noqa: E402
from views import sources  # noqa: E402
from views.ask import episode_stream, read_for_ask, step_memory_ids, suggested_questions  # noqa: E402
from views.ask_records import answer_from_records  # noqa: E402
from views import share  # noqa: E402
from views.common import clip, md_code, md_text, model_markdown  # noqa: E402
from views.memory_panels import plotly_safe  # noqa: E402
from views.visitor_limits import QueueRefused  # noqa: E402
from views.stores import default_store, is_store, short_path  # noqa: E402

S = st.session_state
S.setdefault("ask_history", [])


def _traces() -> list[Path]:
    examples = list_traces(sources.examples_dir())
    return examples + [p for p in list_traces(sources.runs_dir()) if p not in examples]


def _episode_stream(trace: str):
    """The episode's memories (written the first time, extended for a live run's new steps) and its records."""
    ep = read_for_ask(trace)
    with st.spinner("Writing the episode's memories (each step becomes one memory)..."):
        stream = episode_stream(ep.header, ep.steps)
    return stream, ep.header, ep.steps, ep.summary


def sidebar() -> dict:
    with st.sidebar:
        st.header("Ask the agent")
        mode = st.radio("Ask about", ["episode", "store"], key="ask_mode", persist_state="session", horizontal=True,
                        format_func={"episode": "a recorded episode", "store": "a memory store"}.get,
                        help="An episode: every step of it is one memory, with the reason the agent had. A store: "
                             "the episodic memory the agent itself wrote across runs (AMM).")
        out: dict = {"mode": mode}
        if mode == "episode":
            traces = _traces()
            linked = sources.resolve_trace(st.query_params.get("trace"))
            if linked is not None and linked not in traces:
                traces.insert(0, linked)
            if not traces:
                st.warning("No recorded episode yet: run one on the Run page, or ask a memory store.")
            else:
                if linked is not None and S.get("ask_linked") != str(linked):
                    S["ask_linked"], S["ask_trace"] = str(linked), str(linked)
                names = [str(p) for p in traces]
                if S.get("ask_trace") not in names:
                    S["ask_trace"] = names[0]
                out["trace"] = st.selectbox("Episode", names, key="ask_trace", persist_state="session", format_func=sources.trace_label)
        else:
            d, why = default_store()
            S.setdefault("ask_store", d)
            out["store"] = st.text_input("Memory store directory", key="ask_store", persist_state="session", help=f"Default: {why}.")
        st.divider()
        out["llm"] = llm_choice()
        S.setdefault("ask_k", MemoryConfig().top_k)
        out["k"] = int(st.number_input("Memories retrieved (k)", 1, 10, key="ask_k", persist_state="session",
                                       help="How many memories the answer may use (`memory.top_k`)."))
        S.setdefault("ask_phrase", True)
        out["phrase"] = st.toggle("The model phrases exact answers", key="ask_phrase", persist_state="session",
                                  help="A question the step records answer exactly is answered from them. On: the "
                                       "model words that answer (a wording that loses an action or a number is not "
                                       "used). Off: the records' own sentence, at once.")
        if st.button("Clear the conversation", key="ask_clear"):
            S["ask_history"] = []
        share.passcode_box()
    return out


def llm_choice() -> LLMConfig:
    """Which model phrases the answer: chosen here locally, the operator's in a shared app (shown, not editable)."""
    if share.share_mode():
        op = share.operator()
        st.caption(f"**Model that answers**: {op.llm_label()} · fixed by whoever started this shared app."
                   + ("" if share.may_ask_model() else " In this class the model is kept for the teacher's run: "
                      "your question gets the memories that answer it, without the model's sentence."))
        return op.llm()
    op = share.operator_or_default()
    S.setdefault("ask_backend", op.backend)
    backend = st.selectbox("Model that answers", ["embedded", "openai"], key="ask_backend", persist_state="session",
                           format_func={"embedded": "embedded (offline, on this CPU)",
                                        "openai": "OpenAI-compatible server (vLLM, Ollama, ...)"}.get)
    cfg = LLMConfig(backend=backend)
    if backend == "embedded":
        S.setdefault("ask_emb", DEFAULT_EMBEDDED)
        cfg.embedded_model = st.selectbox("Embedded model", list(EMBEDDED_MODELS), key="ask_emb", persist_state="session",
                                          format_func=lambda k: EMBEDDED_MODELS[k].title,
                                          help="Qwen2.5-Coder-1.5B answers sensibly in ~15-30 s on a 2-core "
                                               "CPU; SmolLM2-135M in seconds, but its answers are poor.")
    else:
        S.setdefault("ask_url", op.base_url)
        S.setdefault("ask_model", op.model)
        cfg.base_url = st.text_input("Server URL", key="ask_url", persist_state="session", help="The /v1 address, e.g. vLLM's.")
        cfg.model = st.text_input("Model name", key="ask_model", persist_state="session", help="Empty: the server's default.")
    return cfg


def open_source(choice: dict):
    """(stream, label, header, steps, summary) or None with a message shown."""
    if choice["mode"] == "episode":
        trace = choice.get("trace")
        if not trace:
            return None
        try:
            stream, header, steps, summary = _episode_stream(trace)
        except (OSError, TraceError) as e:
            st.error(f"This episode cannot be read: {md_text(e)}")
            return None
        return stream, sources.trace_label(trace), header, steps, summary
    store = choice.get("store", "")
    try:
        share.checked_path(store, what="memory stores")
    except share.PathRefused as e:
        st.error(str(e))
        return None
    if not is_store(store):
        st.warning(f"There is no memory store at {md_text(repr(store))} (no chroma.sqlite3 there).")
        return None
    stream = open_stream(MemoryConfig(persist_dir=store))
    stream.refresh()
    return stream, f"memory store {short_path(store)}", None, None, None


def render_retrieved(result: RetrievalResult, key: str, cited: list[str] | None = None) -> None:
    mems = top_candidates(result)
    if not mems:
        st.info("No memory came back for this question." + (f" ({md_text(result.error)})" if result.error else ""))
        return
    st.caption(f"Retrieved {len(mems)} of {result.eligible} memories: score = recency + importance + relevance, "
               f"each scaled to 0-1 over all the memories (weights {md_text(result.weights)}). The answer may use only "
               f"these.")
    st.plotly_chart(breakdown_figure(plotly_safe(mems), result.weights), key=f"{key}_chart")  # hover text is HTML
    cited = cited or []
    table = pd.DataFrame([{
        "#": i, "memory": c.id, "cited": "yes" if c.id in cited else "", "type": c.type, "score": round(c.score, 3),
        "recency": round(c.recency_n, 2), "importance": round(c.importance_n, 2), "relevance": round(c.relevance_n, 2),
        "won on": max(("recency", c.recency_n), ("importance", c.importance_n), ("relevance", c.relevance_n),
                      key=lambda kv: kv[1])[0],
        "description": c.description} for i, c in enumerate(mems, 1)])
    st.dataframe(table, hide_index=True, key=f"{key}_table")


def render_answer(ans: Answer) -> None:
    if ans.error:
        st.error(f"The model could not answer: {md_text(ans.error)}. The memories it would have used are above.")
        return
    if ans.grounding == "records" and not ans.phrasing.startswith("phrased by"):
        st.markdown("  \n".join(md_text(line) for line in ans.text.splitlines()))  # the records' words, literally
    else:  # the model's words: its emphasis and lists render, never an image, a link or HTML
        st.markdown(model_markdown(ans.text))
    took = f" · {md_text(ans.model)} · {ans.latency_s:.1f} s" if ans.model else ""
    if ans.grounding == "records":
        st.caption(f"Exact: built from the step records ({md_text(ans.phrasing)}) · cites "
                   + ", ".join(md_code(c) for c in ans.cited) + took if ans.cited else
                   f"Exact: built from the step records ({md_text(ans.phrasing)}){took}")
    elif ans.cited:
        st.caption("Cites " + ", ".join(md_code(c) for c in ans.cited) + took)
    else:
        st.caption(f"This answer cites no memory, so nothing above backs it: read it with care{took}")
    bad = ans.unsupported()
    if bad:
        st.warning("Check this answer against its memories: " + "; ".join(
            f"\"{md_text(clip(x.line, 90))}\": {md_text(x.describe())}" for x in bad) + ".")
    if ans.bad_citations:
        st.warning(f"The model cited memories that were not shown to it: {md_text(ans.bad_citations)} "
                   f"(marked [?n]).")
    if ans.prompt:
        with st.expander("The exact prompt and the model's raw output"):
            st.code(ans.prompt, language=None)
            st.code(ans.raw or "(empty)", language=None)


def render_records(cited: list[dict], key: str) -> None:
    """The step memories an exact answer is about (the records themselves are on the Run page)."""
    st.caption("Answered from the step records, exactly; these are the memories of the steps it is about.")
    if cited:
        st.dataframe(pd.DataFrame(cited), hide_index=True, key=key)


def usual_seconds(model: str) -> float | None:
    lat = [h["answer"]["latency_s"] for h in S["ask_history"] if h["answer"] and h["answer"]["model"] == model
           and not h["answer"]["error"]]
    return statistics.median(lat[-5:]) if lat else None


def own_view(cfg: LLMConfig):
    """This visitor's own view of the shared backend (the model is loaded once per server): on the embedded model
    it keeps this visitor's prompt cache apart from other visitors' and from the runs', so an answer does not
    depend on what someone else asked in between (`LLMBackend.for_agent`). Built on each call's permission check."""
    shared = llm_backend(cfg)  # loaded here, in the page's own thread (a Streamlit cache); raises if not allowed
    views = S.setdefault("ask_llm_views", {})
    key = json.dumps(dataclasses.asdict(cfg), sort_keys=True)
    if key not in views or views[key][0] is not shared:
        views[key] = (shared, shared.for_agent())
    return views[key][1]


def _with_model(cfg: LLMConfig, model: str, question: str, call, what: str) -> Answer:
    """Run `call(generate)` in a thread while a box counts the seconds; the model is stopped if the page is left."""
    box = st.empty()
    cancel = threading.Event()
    done: dict = {}
    try:
        backend = own_view(cfg)
    except Exception as e:  # noqa: BLE001 - a backend that cannot even be built: shown, not raised
        return Answer(question=question, memory_ids=[], prompt="", error=f"{type(e).__name__}: {e}", model=model)
    ticket = None
    if share.share_mode() and not share.unlocked():  # a visitor: in line behind the class's other questions
        try:
            ticket = share.visitor_queue().join(share.session_key())
        except QueueRefused as e:
            return Answer(question=question, memory_ids=[], prompt="", error=str(e), model=model)
        try:
            while (pos := ticket.position()) > 0:
                box.info(f"⏳ Your question is number {pos + 1} in line for the model ({pos} before it); it starts "
                         f"when they are answered.")
                time.sleep(0.5)
        except BaseException:  # the page was left while waiting: give the place up
            ticket.release()
            raise

    def work() -> None:
        done["answer"] = call(lambda p: backend.chat(p, max_tokens=ANSWER_MAX_TOKENS, stop=list(STOP),
                                                     cancel=cancel).text)

    th = threading.Thread(target=work, daemon=True)
    t0 = time.perf_counter()
    th.start()
    est = usual_seconds(model)
    try:
        while th.is_alive():
            waited = time.perf_counter() - t0
            hint = (f"usually ~{est:.0f} s with this model here" if est is not None else
                    "the embedded Qwen takes ~15-30 s on a 2-core CPU, SmolLM2 a few seconds")
            box.info(f"⏳ {md_text(model)} is {what}: {waited:.0f} s ({hint}).")
            th.join(0.5)
    finally:
        cancel.set()  # the page was left or rerun mid-call: stop the model call too
        if ticket is not None:
            ticket.release()
    box.empty()
    done["answer"].cache = getattr(backend, "last_cache", "")
    return done["answer"]


def ask(question: str, stream, label: str, choice: dict, opened: tuple) -> None:
    cfg: LLMConfig = choice["llm"]
    model = cfg.embedded_model if cfg.backend == "embedded" else (cfg.model or cfg.base_url)
    _, _, header, steps, summary = opened
    n = len(S["ask_history"])
    with st.chat_message("user"):
        st.markdown(md_text(question))
    with st.chat_message("assistant", avatar="🧠"):
        exact = answer_from_records(question, header, steps, summary) if header is not None and steps else None
        if exact is not None:
            ids = step_memory_ids(stream)
            cited = [{"memory": ids[k], "step": k, "description": stream.get(ids[k]).description}
                     for k in exact.steps if k in ids]
            render_records(cited, key=f"ask_new_{n}_records")
            mids = [c["memory"] for c in cited]
            if choice.get("phrase", True) and share.may_ask_model():
                ans = _with_model(cfg, model, question, lambda gen: phrase_facts(
                    question, exact.text, exact.keep(), mids, gen, model=model), "phrasing the records' answer")
                if ans.error:  # the model could not even be loaded: the exact answer stands in the records' words
                    err, ans = ans.error, phrase_facts(question, exact.text, exact.keep(), mids, None)
                    ans.phrasing = f"the records' own words (no phrasing by the model: {err})"
            else:
                ans = phrase_facts(question, exact.text, exact.keep(), mids, None)
            render_answer(ans)
            S["ask_history"].append({"question": question, "source": label, "retrieval": None, "records": cited,
                                     "answer": ans.to_dict()})
            return
        with st.spinner("Searching the memories..."):
            result = retrieve_for_question(stream, question, k=choice["k"])
        table = st.empty()  # drawn again once the answer says which memories it cites
        with table.container():
            render_retrieved(result, key=f"ask_new_{n}")
        if not share.may_ask_model():  # a locked classroom browser: the memories above are the answer
            st.caption("The memories above are what the agent would answer from; in this class the model that "
                       "phrases an answer is kept for the teacher.")
            S["ask_history"].append({"question": question, "source": label, "retrieval": result.to_dict(),
                                     "answer": None})
            return
        n_mem = len(top_candidates(result))
        ans = _with_model(cfg, model, question, lambda gen: answer_question(question, result, gen, model=model),
                          f"answering from the {n_mem} memories above")
        if ans.cited:
            table.empty()
            with table.container():
                render_retrieved(result, key=f"ask_new_{n}_cited", cited=ans.cited)
        render_answer(ans)
    S["ask_history"].append({"question": question, "source": label, "retrieval": result.to_dict(),
                             "answer": ans.to_dict()})


choice = sidebar()
st.title("Ask the agent")
st.caption("What is this? Ask the agent why it did something or what it knows. As in Generative Agents, your "
           "question first retrieves the agent's most useful memories (recent, important and relevant to the "
           "question: each memory's three scores are shown), then the language model answers from those memories "
           "only and cites them by id. Asking does not change the agent's memory.")
opened = open_source(choice)
for i, h in enumerate(S["ask_history"]):
    with st.chat_message("user"):
        st.markdown(md_text(h["question"]))
        st.caption(md_text(h["source"]))
    with st.chat_message("assistant", avatar="🧠"):
        ans = Answer.from_dict(h["answer"]) if h["answer"] else None
        if h.get("retrieval") is None:
            render_records(h.get("records") or [], key=f"ask_h{i}_records")
        else:
            render_retrieved(RetrievalResult.from_dict(h["retrieval"]), key=f"ask_h{i}",
                             cited=ans.cited if ans else None)
        if ans is not None:
            render_answer(ans)

if opened is not None:
    stream, label, header, steps, _summary = opened
    new = st.container()  # the new exchange goes under the earlier ones, above the suggestions
    st.caption(f"Asking about **{md_text(label)}** · {len(stream)} memories")
    question = None
    if header is not None and steps:
        st.caption("Try one of these:")
        cols = st.columns(2)
        for j, q in enumerate(suggested_questions(header, steps)):
            if cols[j % 2].button(md_text(q), key=f"ask_suggest_{j}", width="stretch"):  # built from the trace
                question = q
    typed = st.chat_input("Ask the agent a question, e.g. why did you pick up the thermometer?", key="ask_input")
    question = typed or question
    if question and question.strip():
        with new:
            ask(question.strip(), stream, label, choice, opened)
