"""First visit: the Run page opens on a shipped example with a four-step tour (open it, step it, see a switch to
Sage, open a retrieval), ticked from what the student did; dismissable; Play steps through the recorded episode
(views/tour.py, pages/0_Run.py). The keys and the remembered dismissal are checked in Chromium (test_browser)."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from views import tour

pytestmark = pytest.mark.page

ROOT = Path(__file__).resolve().parents[1]
PAGE = str(ROOT / "pages" / "0_Run.py")


def _tour_text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def _fresh(monkeypatch, tmp_path) -> AppTest:
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(tmp_path / "runs"))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.fast
def test_first_visit_opens_the_example_and_the_tour_follows_the_student(monkeypatch, tmp_path):
    at = _fresh(monkeypatch, tmp_path)
    assert at.radio(key="run_source").value == "Recorded episode"
    assert Path(at.selectbox(key="run_trace").value).name == tour.EXAMPLE
    assert "(1 of 4 done)" in _tour_text(at) and "👉 **2. Step through it**" in _tour_text(at)
    at.button(key="run_rec_next").click().run()
    assert at.slider(key="run_rec_step").value == 1 and "(2 of 4 done)" in _tour_text(at)
    at.button(key="tour_goto_2").click().run()  # "Go to step 10": the switch to Sage
    assert at.slider(key="run_rec_step").value == 10
    assert "(3 of 4 done)" in _tour_text(at) and "👉 **4. Open a retrieval**" in _tour_text(at)
    opens = [b for b in at.button if b.key and b.key.startswith("run_mem_10_") and b.key.endswith("_open")]
    assert opens, "step 10 shows a retrieval card with its explorer button"
    opens[0].click().run()
    assert "(4 of 4 done)" in _tour_text(at) and at.button(key="tour_finish")
    at.button(key="tour_finish").click().run()
    assert not any("four-step tour" in m.value for m in at.markdown)
    assert at.button(key="tour_again")  # it can come back
    at.button(key="tour_again").click().run()
    assert any("four-step tour" in m.value for m in at.markdown)


def test_dismiss_hides_the_tour_and_a_link_skips_the_first_visit(monkeypatch, tmp_path):
    at = _fresh(monkeypatch, tmp_path)
    at.button(key="tour_dismiss").click().run()
    assert not any("four-step tour" in m.value for m in at.markdown) and at.session_state["tour_show"] is False
    other = ROOT / "assets" / "episodes" / "inclined-plane-friction-named-surfaces-v1038-srm.jsonl"
    linked = AppTest.from_file(PAGE, default_timeout=120)
    linked.query_params["trace"] = str(other.relative_to(ROOT))
    linked.run()
    assert Path(linked.selectbox(key="run_trace").value).name == other.name  # the link wins over the example


def test_play_steps_through_the_recorded_episode_and_stops_at_the_end(monkeypatch, tmp_path):
    at = _fresh(monkeypatch, tmp_path)
    at.selectbox(key="run_play_every").set_value(1.0).run()
    last = int(at.slider(key="run_rec_step").max)  # the example's last step
    at.slider(key="run_rec_step").set_value(last - 3).run()
    assert at.button(key="run_rec_play").label == "▶ Play"
    at.button(key="run_rec_play").click().run()  # plays the last 3 steps (one rerun a second) and stops at the last
    assert not at.exception, at.exception
    assert at.slider(key="run_rec_step").value == last and at.session_state["run_playing"] is False
    assert at.button(key="run_rec_play").label == "▶ Play"
    at.slider(key="run_rec_step").set_value(last - 1).run()
    at.button(key="run_rec_play").click().run()
    at.button(key="run_rec_prev").click().run()  # back one step by hand after playing
    assert at.session_state["run_playing"] is False and at.slider(key="run_rec_step").value == last - 1
