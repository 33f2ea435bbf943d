"""Configurations: the named presets and every number the agent honours."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from agent_core.config import PRESETS, preset

st.title("Configurations")
st.caption("What is this? The agent's behaviour is set by feature flags and numbers from the papers. A "
           "*preset* names one combination: Baseline (SwiftSage), +AMM (memory), +SRM (self-reflection), Full, "
           "and sensitivity variants.")

# a table that wraps its text: the presets' descriptions are sentences, cut off in a grid's cells
st.table(pd.DataFrame([{"preset": k, "what it is": v[0],
                        "changes from defaults": ", ".join(f"{a}={b}" for a, b in v[1].items()) or "-"}
                       for k, v in PRESETS.items()]), hide_index=True)

name = st.selectbox("Show every field of", list(PRESETS))
cfg = preset(name).to_record()  # never shows an API key from the environment
rows = []
for section, values in cfg.items():
    if isinstance(values, dict):
        for k, v in values.items():
            rows.append({"section": section, "field": k, "value": str(v)})
    else:
        rows.append({"section": "", "field": section, "value": str(values)})
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=600)
st.caption("Override any field from the command line as `section.field=value`, or load a JSON/TOML file "
           "with the same sections (see docs/CONFIGURATION.md).")
