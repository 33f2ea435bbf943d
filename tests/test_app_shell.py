"""The shell every page run shares (app.py, views/app_shell.py): settings survive a visit to another page, page
URLs are case-insensitive, and a class sees no developer tools (Streamlit's toolbar in viewer mode)."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from views import app_shell

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.page
@pytest.mark.model  # the Ask page opens an episode's memory stream (the sentence embedder)
def test_settings_survive_a_visit_to_another_page(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(tmp_path / "runs"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/6_Ask.py").run()
    assert not at.exception
    at.number_input(key="ask_k").set_value(7).run()
    at.toggle(key="ask_phrase").set_value(False).run()
    at.switch_page("pages/1_Tasks.py").run()  # the Ask widgets are not drawn on this run
    assert not at.exception
    at.switch_page("pages/6_Ask.py").run()
    assert at.number_input(key="ask_k").value == 7 and at.toggle(key="ask_phrase").value is False


def test_page_urls_are_case_insensitive(monkeypatch):
    """Against Streamlit's own PagesManager: /Compare resolves to the page at /compare."""
    from streamlit.runtime.pages_manager import PagesManager

    pm = PagesManager(str(ROOT / "app.py"))
    pages = {"h0": {"page_script_hash": "h0", "url_pathname": "", "script_path": "pages/0_Run.py"},
             "h5": {"page_script_hash": "h5", "url_pathname": "compare", "script_path": "pages/5_Compare.py"}}

    class Ctx:
        pages_manager = pm

    monkeypatch.setattr(app_shell, "get_script_run_ctx", lambda: Ctx)  # the page run's context, a stand-in
    for asked, found in (("Compare", "h5"), ("COMPARE", "h5"), ("compare", "h5"), ("nowhere", None)):
        pm.set_script_intent("", asked)
        app_shell.case_insensitive_url(["", "evaluate", "compare", "ask"])
        got = pm.set_pages_and_resolve(pages, fallback_page_hash="h0")
        assert (got or {}).get("page_script_hash") == found, asked


def test_a_class_sees_no_developer_tools():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["client"]["toolbarMode"] == "viewer"  # no Deploy button, no "C" to clear the model caches


@pytest.mark.page
def test_tasks_and_configurations_pages_show_their_tables_in_full():
    tasks = AppTest.from_file(str(ROOT / "pages" / "1_Tasks.py"), default_timeout=60).run()
    assert not tasks.exception
    chart = tasks.get("plotly_chart")[0]
    import json

    spec = json.loads(chart.proto.spec)
    assert spec["layout"]["height"] >= 26 * 30  # a row per task with room for its name
    conf = AppTest.from_file(str(ROOT / "pages" / "3_Configurations.py"), default_timeout=60).run()
    assert not conf.exception
    table = conf.table[0].value  # a table that wraps its cells, not a grid that cuts them
    assert "full" in list(table["preset"]) and table["what it is"].str.len().max() > 150
