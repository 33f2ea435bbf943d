"""What every page run shares, before the page itself: page URLs that are case-insensitive. Called from app.py.
(Settings survive a visit to another page by Streamlit's own `persist_state="session"` on the Run sidebar's and the
Ask page's widgets.)"""
from __future__ import annotations

from streamlit.runtime.scriptrunner import get_script_run_ctx


def case_insensitive_url(url_paths: list[str]) -> None:
    """`/Compare` opens the page at `/compare` (Streamlit matches a typed URL exactly and says "Page not found")."""
    ctx = get_script_run_ctx()
    pm = getattr(ctx, "pages_manager", None)
    asked = getattr(pm, "intended_page_name", None)
    if not asked or getattr(pm, "intended_page_script_hash", None):
        return
    match = next((p for p in url_paths if p.lower() == asked.strip("/").lower()), None)
    if match is not None and match != asked:
        pm.set_script_intent("", match)
