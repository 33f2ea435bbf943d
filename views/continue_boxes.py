"""The Run page's ways to go on from a recorded episode: Resume (an interrupted trace, in place), Fork (rerun from
a step under another preset), and the line a fork shows about its parent. Drawing only: a button calls what the
page passes in."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st

from agent_core.config import PRESETS
from agent_core.episode import resume_problem
from agent_core.episode.replay import provenance_changes
from agent_core.provenance import code_revision, machine
from views import share, sources
from views.common import md_code, md_text

S = st.session_state


def resume_box(path: str, ep, on_resume: Callable[[str, int], None]) -> None:
    """An interrupted trace (killed, stopped, or ended by an error) can be continued in place."""
    if not share.unlocked():
        return
    if resume_problem(ep) is not None:
        return
    why = ("it has no summary: the run was killed or is still running elsewhere" if ep.summary is None else
           f"it was {md_text(ep.summary.reason)}" + (f" ({md_text(ep.summary.error)})" if ep.summary.error else ""))
    st.warning(f"This episode did not finish ({why}). **Resume** continues it in the same trace: a fresh "
               f"ScienceWorld replays its {len(ep.steps)} recorded actions, checks each observation, and the agent "
               f"goes on from step {len(ep.steps) + 1} (with this session's LLM settings).")
    changes = provenance_changes(ep.header.code, ep.header.config_hash, code_revision(), "", ep.header.machine,
                                 machine())
    if changes or (ep.steps and ep.steps[-1].after is None):
        st.caption("Not exact: " + (md_text("; ".join(changes)) if changes else "this trace predates the state digest, so a "
                   "waiting Critic report and the buffer's failure count are not rebuilt") + ". The resume goes on "
                   "with the code running now.")
    st.button(f"Resume from step {len(ep.steps) + 1}", key="run_resume", width="stretch",
              on_click=on_resume, args=(path, len(ep.steps)))


def fork_box(path: str, ep, t: int, on_fork: Callable[[str, int, str, bool], None]) -> None:
    """Sidebar: rerun the recorded episode from the shown step with another preset."""
    if not share.unlocked():
        return
    n = len(ep.steps)
    ended = t > 0 and ep.steps[t - 1].done
    with st.expander("Rerun from this step (fork)", expanded=False):
        st.caption("Replays the recorded actions up to this step in a fresh ScienceWorld (each observation is "
                   "checked against the record), then lets the preset you choose play on as a new live run. "
                   "The Compare page then shows both.")
        if ended:
            st.caption(f"The episode ended at step {t}: pick an earlier step to fork.")
            return
        parent_preset = (ep.header.config or {}).get("preset", "baseline")
        S.setdefault("run_fork_preset", "srm" if parent_preset != "srm" else "full")
        pre = st.selectbox("Preset for the fork", list(PRESETS), key="run_fork_preset")
        st.toggle("Quick demo: Swift alone (no model calls)", key="run_fork_quick")
        st.button(f"Fork at step {t} of {n}", key="run_fork", width="stretch",
                  on_click=lambda: on_fork(  # the widgets' values at the click, not at the last draw
                      path, t, S.get("run_fork_preset", pre), bool(S.get("run_fork_quick"))))


def parent_line(par: dict, path: str) -> None:
    """A fork says where it came from, with a link to the comparison."""
    c1, c2 = st.columns([3, 1])
    c1.info(f"This run is a fork of {md_code(Path(str(par.get('trace', '?'))).name)}: its first "
            f"{md_text(par.get('step', 0))} steps replay "
            f"that episode's actions (checked against its observations); its own agent decides from step "
            f"{int(par.get('step', 0)) + 1} on.")
    q = {"a": sources.link_path(par.get("trace", "")), "b": sources.link_path(path)}
    try:
        c2.page_link("pages/5_Compare.py", label="Compare with the parent", icon="🔀", query_params=q)
    except Exception:  # noqa: BLE001 - the page runs on its own (tests): give the link as text
        link = f"compare?a={q['a']}&b={q['b']}"
        c2.markdown(f"Compare: {md_code(link)}")
