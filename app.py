"""SwiftSage Explorer: watch a dual-process language agent think in ScienceWorld.

Entry point: navigation and the shared layout. Every page lives in pages/ and only reads
agent_core / memory_store; nothing imports pages/.
"""
from __future__ import annotations

import os

import pandas  # noqa: F401, E402 - imported once, up front, before any session thread builds a figure
import streamlit as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from views import share  # noqa: E402 - after the offline switches
from views.app_shell import case_insensitive_url, refuse_bad_query, run_page  # noqa: E402

st.set_page_config(page_title="SwiftSage Explorer", page_icon="🧪", layout="wide")

PAGES = [
    st.Page("pages/0_Run.py", title="Run", icon="▶️", default=True),
    st.Page("pages/1_Tasks.py", title="Tasks", icon="📚"),
    st.Page("pages/2_Memory.py", title="Memory explorer", icon="🧠"),
    st.Page("pages/3_Configurations.py", title="Configurations", icon="⚙️"),
    st.Page("pages/4_Evaluate.py", title="Evaluate", icon="📊", url_path="evaluate"),
    st.Page("pages/5_Compare.py", title="Compare", icon="🔀", url_path="compare"),
    st.Page("pages/6_Ask.py", title="Ask the agent", icon="💬", url_path="ask"),
]
share.refuse_unserved_host()  # a name the app does not serve (DNS rebinding) gets one line and nothing else
share.lower_priority_for_visitors()  # a classroom's visitors draw their pages below the teacher's run
case_insensitive_url([p.url_path for p in PAGES])
refuse_bad_query()
nav = st.navigation(PAGES)
run_page(nav, visitor=share.share_mode())
