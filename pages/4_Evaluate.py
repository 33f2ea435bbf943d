"""Evaluate: the results of `python -m agent_core.evaluate` (docs/AGENT.md §8): Table 1 (Final, Success,
Steps@Succ), the task groups, mechanism activity, Plotly charts, and every episode, which opens on the
Run page or next to the same episode under another preset on the Compare page. The page reads the
evaluation's traces, so a running evaluation shows what has finished so far."""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # AppTest.from_file runs this file on its own
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from agent_core.evaluate import decision_value, load_results  # noqa: E402
from agent_core.evaluate.report import mixed_code_line  # noqa: E402
from views import evaluation as ev  # noqa: E402
from views.common import md_code, md_text  # noqa: E402
from views import sources  # noqa: E402

S = st.session_state
st.title("Evaluate: compare the presets")
st.caption("What is this? An evaluation plays every chosen preset on the same ScienceWorld test variations and "
           "scores them as the paper does: **Final** is the last score of an episode (a negative one counts as 0), "
           "**Success** the share of episodes that reach 100, **Steps@Succ** how many steps the successful ones "
           "took; each is averaged per task first, then over tasks. Start one with `python -m agent_core.evaluate` "
           "(docs/EVALUATION.md).")


@st.cache_data(show_spinner="Reading the evaluation's traces...", ttl=30, max_entries=8)
def _results(path: str, stamp: float):
    return load_results(Path(path))


dirs = sources.evaluation_dirs()
wanted = st.query_params.get("eval")
if wanted:
    try:
        asked = str((sources.ROOT / wanted).resolve())
    except (OSError, ValueError, RuntimeError):  # a value no path has (the app shell drops control characters)
        asked = ""
    match = [d for d in dirs if d.name == wanted or str(d.resolve()) == asked]
    if match:
        S["eval_dir"] = str(match[0].resolve())
    else:
        st.error(f"{md_code(wanted)} is not an evaluation under {sources.evals_dir()} or {sources.shipped_evals_dir()}; "
                 f"choose one below.")
if not dirs:
    st.info(f"No evaluations yet under `{sources.evals_dir()}`. Run one, for example:\n\n"
            f"```\n.venv/bin/python -m agent_core.evaluate --out {sources.evals_dir()}/quick --tasks 0 13 "
            f"--variations 1 --max-steps 30 --presets baseline srm --set controller.sage_enabled=false\n```")
    st.stop()
names = [str(d.resolve()) for d in dirs]
if S.get("eval_dir") not in names:
    S["eval_dir"] = names[0]
with st.sidebar:
    st.header("Evaluation")
    path = st.selectbox("Evaluation directory", names, key="eval_dir", format_func=sources.evaluation_label,
                        help=f"Your evaluations under {sources.evals_dir()} (SWIFTSAGE_EVALS_DIR), newest first, then the "
                             f"ones shipped in assets/evaluations, then the measurement records committed under evals/ "
                             f"(evals/RECORDS.txt).")
    st.button("Reload", key="eval_reload", help="Read the traces again (an evaluation may still be running).",
              on_click=_results.clear)
# the name alone where it is unique; else the folder relative to the project (the shipped cpu-30x2x30 and the
# measurement record of the same name), so that a shared link opens the evaluation that was chosen
st.query_params["eval"] = (Path(path).name if sum(Path(n).name == Path(path).name for n in names) == 1
                           else sources.link_path(path))
stamp = max((p.stat().st_mtime for p in Path(path).glob("traces/*/*.jsonl")), default=0.0)
try:
    res = _results(path, stamp)
except (OSError, ValueError) as e:
    st.error(f"Cannot read the evaluation in {path}: {e}")
    st.stop()

spec = res["spec"]
st.markdown(f"**{md_text(Path(path).name)}**: {res['episodes_done']} of {res['episodes_asked']} episodes finished · "
            f"split {md_code(spec['split'])} · step limit {md_text(spec['step_limit'])} · " +
            (f"variations {md_text(spec['variation_list'])}" if spec.get("variation_list") else
             f"first {md_text(spec['variations'])} {md_text(spec['split'])} variation(s) per task") +
            (f" · overrides {md_code(' '.join(map(str, spec['overrides'])))}" if spec.get("overrides") else ""))
if res["missing"]:
    st.warning(f"{len(res['missing'])} episode(s) not finished yet (still running, or interrupted: rerun the same "
               f"command to resume).")
mixed = mixed_code_line(res.get("provenance") or {})
if mixed:  # a re-play of some presets after a fix: say which preset ran which code
    st.warning(md_text(mixed[0].upper() + mixed[1:]) + " Paired differences then compare agents of different "
               "revisions.")  # the recorded revisions and preset names, escaped
machines = (res.get("provenance") or {}).get("machines") or {}
if len([m for m in machines if m != "not recorded"]) > 1:  # pairs may then mix a mechanism with a CPU's rounding
    st.warning("The episodes were played on more than one machine: " +
               md_text(", ".join(f"{k} ({v})" for k, v in machines.items())) + ". The paired table below counts the pairs "
               "whose two episodes were played on different kinds of machine (CPU model or vector instructions).")
if not res["preset_order"]:
    st.info("No episode has finished yet.")
    st.stop()

st.subheader("Table 1: Final, Success, Steps@Succ")
st.dataframe(pd.DataFrame(ev.table1(res)), hide_index=True, width="stretch")
st.caption("The paper's columns are its reference run (Flan-T5-large Swift, Qwen2.5-7B-Instruct on vLLM, 271 "
           "episodes per preset): a shape to compare against, not the same agent or the same episodes.")
st.plotly_chart(ev.final_per_task_figure(res), width="stretch", key="eval_per_task")
c1, c2 = st.columns(2)
with c1:
    st.subheader("Task groups")
    st.caption("Tasks grouped by the length of their expert (gold) path: Short <= 20 steps, Medium 21-50, Long > 50.")
    st.dataframe(pd.DataFrame(ev.group_rows(res)), hide_index=True, width="stretch")
    st.plotly_chart(ev.groups_figure(res), width="stretch", key="eval_groups")
with c2:
    st.subheader("Mechanism activity")
    st.caption("How often each mechanism acted, per episode on average: memory writes and retrievals (AMM), "
               "stagnation reports, Critic calls and Gate-1 drops (SRM), and who chose the actions.")
    st.dataframe(pd.DataFrame(ev.mechanism_rows(res)), hide_index=True, width="stretch")
st.plotly_chart(ev.mechanism_figure(res), width="stretch", key="eval_mech")

if res.get("paired"):
    ref = ev.label(next(iter(res["paired"].values()))["reference"])
    st.subheader(f"Paired against {ref}")
    st.caption(f"Each preset against {ref} on the same task and variation: the mean difference in Final with its "
               "95% interval (an interval that contains 0 means this many pairs cannot tell the two apart), how "
               "many pairs took a different action somewhere, and how many losses a design rule (code, not a "
               "model) decided; a loss after Gate-1 dropped what the game rejected in the reference (a *saved* "
               "step) is counted apart. Below, every pair that diverged: the first step where the two parted and what "
               "decided it. Select a row to open both episodes on the Compare page at that step.")
    st.dataframe(pd.DataFrame(ev.paired_rows(res)), hide_index=True, width="stretch")
    arows = ev.attribution_rows(res)
    if arows:
        adf = pd.DataFrame(arows)
        picked = st.dataframe(adf.drop(columns=["trace", "trace_ref"]), hide_index=True, width="stretch",
                              key="eval_attribution", on_select="rerun", selection_mode="single-row", height=300,
                              column_config={"change": st.column_config.NumberColumn(format="%+g")})
        asel = picked.selection.rows if picked is not None and hasattr(picked, "selection") else []
        if asel:
            r = adf.iloc[asel[0]]
            q = {"a": sources.link_path(r["trace_ref"]), "b": sources.link_path(r["trace"]), "step": str(r["step"])}
            try:
                st.page_link("pages/5_Compare.py", label=f"Compare {md_text(r['task'])} v{md_text(r['variation'])} "
                                                         f"at step {md_text(r['step'])}",
                             icon="🔀", query_params=q)
            except Exception:  # noqa: BLE001 - the page runs on its own (tests): give the link as text
                link = f"compare?a={q['a']}&b={q['b']}&step={q['step']}"
                st.markdown(f"Compare: {md_code(link)}")

if res.get("decision_values"):
    dv_set = res["decision_values"].get("settings") or {}
    st.subheader("Decision values: what each decision changed")
    st.caption("For every step where a mechanism changed the action, two copies of the game branch from the state "
               "before it: one plays the mechanism's action, the other the action it replaced (Swift's own, the "
               f"dropped one, the original guess), then "
               f"{md_text(decision_value.POLICY_WORDS.get(dv_set.get('policy', 'swift'), dv_set.get('policy')))} plays on for "
               f"{md_text(dv_set.get('horizon', '?'))} steps. The value is the first branch's score less the second's. "
               "An interval that contains 0 means these decisions cannot be told from no decision. These rollouts "
               "are measurements after the fact: the agent never looks ahead when it plays. "
               + md_text(dv_set.get("note", "")))
    st.dataframe(pd.DataFrame(ev.decision_value_rows(res)), hide_index=True, width="stretch")
    st.plotly_chart(ev.decision_value_figure(res), width="stretch", key="eval_decision_values")
    drows = ev.decision_rows(decision_value.load(Path(path)))
    if drows:
        ddf = pd.DataFrame(drows)
        dpick = st.dataframe(ddf.drop(columns=["trace", "with_path", "without_path"]), hide_index=True,
                             width="stretch", key="eval_decisions", on_select="rerun", selection_mode="single-row",
                             height=300, column_config={"value": st.column_config.NumberColumn(format="%+g")})
        dsel = dpick.selection.rows if dpick is not None and hasattr(dpick, "selection") else []
        if dsel:
            d = ddf.iloc[dsel[0]]
            links = [("the episode at this step", "pages/0_Run.py", {"trace": sources.link_path(d["trace"]),
                                                                     "step": str(d["step"])})]
            if d["with_path"] and d["without_path"] and Path(d["with_path"]).exists() and \
                    Path(d["without_path"]).exists():
                links.append(("the two branches side by side", "pages/5_Compare.py",
                              {"a": sources.link_path(d["without_path"]), "b": sources.link_path(d["with_path"]),
                               "step": str(d["step"])}))
            for text, page, q in links:
                try:
                    st.page_link(page, label=f"Open {text}", icon="🔀", query_params=q)
                except Exception:  # noqa: BLE001 - the page runs on its own (tests): give the link as text
                    st.markdown(f"Open {text}: {md_code(page + '?' + '&'.join(f'{k}={v}' for k, v in q.items()))}")

st.subheader("Episodes")
st.caption("Select a row to open the episode on the Run page, or next to the same task and variation under "
           "another preset on the Compare page.")
rows = ev.episode_rows(res)
df = pd.DataFrame(rows)
f1, f2 = st.columns(2)
show_p = f1.multiselect("Presets", res["preset_order"], default=res["preset_order"], key="eval_filter_presets")
only = f2.selectbox("Show", ["all", "successes", "failures (< 0)", "errors"], key="eval_filter_kind")
view = df[df["preset"].isin(show_p)]
if only == "successes":
    view = view[view["success"]]
elif only == "failures (< 0)":
    view = view[view["final"] < 0]
elif only == "errors":
    view = view[view["ended"] == "error"]
event = st.dataframe(view.drop(columns=["trace"]), hide_index=True, width="stretch", key="eval_episodes",
                     on_select="rerun", selection_mode="single-row", height=360)
sel = event.selection.rows if event is not None and hasattr(event, "selection") else []
if sel:
    row = view.iloc[sel[0]]
    trace = row["trace"]
    st.markdown(f"**{md_text(row['task'])} v{md_text(row['variation'])} · {md_text(row['preset'])}**: final "
                f"{row['final']:g} in {md_text(row['steps'])} "
                f"steps ({md_text(row['ended'])}).")
    b1, b2 = st.columns(2)
    if b1.button("Open on the Run page", key="eval_open_run"):
        S["run_source"], S["run_open_trace"], S["run_trace"] = "Recorded episode", trace, trace
        try:
            st.switch_page("pages/0_Run.py", query_params={"trace": sources.link_path(trace)})
        except Exception:  # noqa: BLE001 - the page runs on its own (tests)
            st.info("Open the Run page: this episode is selected there.")
    others = df[(df["task"] == row["task"]) & (df["variation"] == row["variation"]) & (df["preset"] != row["preset"])]
    for _, o in others.iterrows():
        q = {"a": sources.link_path(trace), "b": sources.link_path(o["trace"])}
        try:
            b2.page_link("pages/5_Compare.py", label=f"Compare with {md_text(o['preset'])}", query_params=q)
        except Exception:  # noqa: BLE001 - the page runs on its own (tests): give the link as text
            link = f"compare?a={q['a']}&b={q['b']}"
            b2.markdown(f"Compare with {md_text(o['preset'])}: {md_code(link)}")
if res.get("problems"):
    with st.expander(f"{len(res['problems'])} trace(s) not counted"):
        for p in res["problems"]:
            st.text(p)
