"""The first-visit tour of the Run page: a shipped example episode is open, and four short steps show what the
app is for (open the example, step it, see a switch to Sage, open a retrieval). Each step is ticked from what
the student has done (read from the session and the step records, nothing else), and the tour can be dismissed.
A dismissed or finished tour is remembered in the browser (a cookie, read back through `st.context.cookies`), so
it does not come back on the next visit; "Show the tour again" brings it back."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from agent_core.trace import StepRecord

COOKIE = "swiftsage_tour"
# the example the tour opens: +AMM on inclined-plane-friction-named-surfaces (docs/RUN_PAGE.md): Swift sets up the
# experiment, the stuck rule calls Sage at step 10 with memory's records (T4), and Sage's picks end at -100 at step
# 14: a switch, a retrieval to open, and a plan and pick that disagree
EXAMPLE = "inclined-plane-friction-named-surfaces-v1038-amm.jsonl"
S = st.session_state


@dataclass
class TourStep:
    title: str
    how: str
    done: bool
    goto: int | None = None  # a button jumps to this step of the episode


def remembered_done() -> bool:
    try:
        return st.context.cookies.get(COOKIE) == "done"
    except Exception:  # noqa: BLE001 - no browser (AppTest, bare mode): nothing remembered
        return False


def should_show() -> bool:
    if S.get("tour_show") is None:
        S["tour_show"] = not remembered_done()
    return bool(S["tour_show"])


def tour_steps(records: list[StepRecord], t: int, example_open: bool) -> list[TourStep]:
    sage = next((r.step for r in records if r.system == "sage"), None)
    retrieval = next((r.step for r in records if r.system == "sage" and r.retrievals), None) or \
        next((r.step for r in records if r.retrievals), None)
    seen: set[str] = S.setdefault("tour_seen", set())
    rec = records[t - 1] if 0 < t <= len(records) else None
    if example_open and t >= 1:
        seen.add("step")
    if rec is not None and rec.system == "sage":
        seen.add("sage")
    if S.get("mem_open_request") or S.get("mem_opened_retrieval"):  # "Open in the Memory explorer" was pressed
        seen.add("retrieval")
    return [
        TourStep("Open a shipped example episode",
                 "This recorded episode ships with the app: every panel below reads its step records, no model is "
                 "called. Any other episode can be chosen under *Recorded episode* in the sidebar.", example_open),
        TourStep("Step through it",
                 "Press **Next ▶** in the sidebar (or the → key; ← goes back, P plays and pauses). The sentence "
                 "at the top of the page says who acted and why.", "step" in seen),
        TourStep("See a switch to Sage",
                 f"Swift (fast) acts until a switching rule fires; then Sage (slow, an LLM) plans. Go to step "
                 f"{sage}: the purple badge and the ⚡ mark on the timeline show the switch, and the Plan panel "
                 f"shows Sage's answers." if sage else "This episode never switches to Sage.",
                 "sage" in seen or sage is None, goto=sage),
        TourStep("Open a retrieval",
                 f"At step {retrieval} the agent searched its memory. In the *Episodic memory* panel, each bar is "
                 f"one memory, split into recency, importance and relevance; press **Open in the Memory "
                 f"explorer** on it to re-rank it with other weights." if retrieval else
                 "This episode has no memory retrieval (its preset runs without AMM).",
                 "retrieval" in seen or retrieval is None, goto=retrieval),
    ]


def _remember_done() -> None:
    """A cookie for a year on the app's own origin (the component's frame shares it)."""
    st.iframe(f"<script>document.cookie = '{COOKIE}=done; max-age=31536000; path=/; SameSite=Lax';</script>",
              height=1)


def _goto(step: int) -> None:
    S["run_rec_step"] = step


def _dismiss() -> None:
    S["tour_show"] = False
    S["tour_remember"] = True


def render_tour(records: list[StepRecord], t: int, example_open: bool) -> None:
    """The tour box above the episode (only while it is shown)."""
    if S.pop("tour_remember", False):
        _remember_done()
    if not should_show():
        return
    steps = tour_steps(records, t, example_open)
    n_done = sum(s.done for s in steps)
    with st.container(border=True, key="tour_box"):
        head, close = st.columns([5, 1])
        head.markdown(f"**👋 New here? A four-step tour** ({n_done} of {len(steps)} done)")
        close.button("Dismiss", key="tour_dismiss", on_click=_dismiss, width="stretch",
                     help="Hide the tour; this browser remembers it. The sidebar can show it again.")
        current = next((i for i, s in enumerate(steps) if not s.done), None)
        for i, s in enumerate(steps):
            mark = "✅" if s.done else ("👉" if i == current else "⬜")
            st.markdown(f"{mark} **{i + 1}. {s.title}**" + (f": {s.how}" if i == current else ""))
            if i == current and s.goto is not None and t != s.goto:
                st.button(f"Go to step {s.goto}", key=f"tour_goto_{i}", on_click=_goto, args=(s.goto,))
        if current is None:
            st.success("That is the whole tour. Next: *Live run* runs the agent yourself; *Ask the agent* answers "
                       "questions from its memories; *Compare* puts two runs side by side.")
            st.button("Close the tour", key="tour_finish", on_click=_dismiss, type="primary")


def show_again_button() -> None:
    if not should_show():
        st.button("Show the tour again", key="tour_again", on_click=lambda: S.update(tour_show=True),
                  width="stretch")
