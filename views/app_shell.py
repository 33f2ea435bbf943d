"""What every page run shares, before the page itself: page URLs that are case-insensitive, link values that are
refused with one line when no page could read them, and a visitor's page error told in plain words (the details go
to the server's log). Called from app.py.
(Settings survive a visit to another page by Streamlit's own `persist_state="session"` on the Run sidebar's and the
Ask page's widgets.)"""
from __future__ import annotations

import logging
import unicodedata

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

log = logging.getLogger("swiftsage.app")
MAX_QUERY_VALUE = 1024  # characters: a trace path or a step number is far shorter


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


def bad_query_value(value: str) -> str | None:
    """Why a link's value cannot be anything a page reads (None when it can): control characters (a NUL byte),
    or a length no path or number has."""
    if len(value) > MAX_QUERY_VALUE:
        return f"is {len(value)} characters long"
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in value):
        return "holds control characters"
    return None


def refuse_bad_query() -> None:
    """Drop link values no page could read, with one line each, before any page sees them."""
    try:
        items = [(k, st.query_params.get_all(k)) for k in list(st.query_params.keys())]
    except Exception:  # noqa: BLE001 - no query string here
        return
    for name, values in items:
        why = bad_query_value(str(name)) or next((w for v in values if (w := bad_query_value(str(v)))), None)
        if why:
            del st.query_params[name]
            shown = "".join(c if unicodedata.category(c) != "Cc" else "?" for c in str(name))[:40]
            st.error(f"The link's `{shown}` value {why}, so it was ignored.")


def run_page(nav, visitor: bool) -> None:
    """Run the chosen page. For a visitor (share mode) an error inside a page is one plain sentence, never a
    traceback; the operator finds the traceback in the server's log. Locally Streamlit shows it as usual."""
    if not visitor:
        nav.run()
        return
    try:
        nav.run()
    except Exception:  # noqa: BLE001 - Streamlit's rerun and stop are BaseExceptions and pass through
        log.exception("a page failed for a visitor")
        st.error("Something went wrong while drawing this page, and it stopped here. The rest of the app still "
                 "works; whoever runs it finds the details in the server's log.")
