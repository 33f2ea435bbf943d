"""Tasks: the 30 ScienceWorld tasks, by topic, with their variations and gold-path lengths."""
from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from agent_core.config import Config
from agent_core.env import catalog

st.title("ScienceWorld tasks")
st.caption("What is this? ScienceWorld is a text game with 30 elementary-science tasks. Each task has many "
           "*variations* (different objects and rooms), split into train / dev / test: the agent learns from "
           "train, and is scored only on test variations it has never seen.")

cat = catalog()
cfg = Config()
rows = []
for t in cat.tasks:
    g = t.gold_length
    group = ("Short" if g <= cfg.eval.short_max_gold_len else "Medium" if g <= cfg.eval.medium_max_gold_len
             else "Long")
    rows.append({"index": t.index, "id": t.task_id, "task": t.name, "topic": t.topic, "title": t.title,
                 "train": len(t.train), "dev": len(t.dev), "test": len(t.test), "gold steps": round(g, 1),
                 "group": group, "electrical": t.electrical})
df = pd.DataFrame(rows)

topics = ["(all)"] + cat.topics()
c1, c2 = st.columns([1, 3])
topic = c1.selectbox("Topic", topics, help="ScienceWorld groups its tasks into 10 science topics.")
query = c2.text_input("Search", placeholder="e.g. boil, plant, conductivity",
                      help="Filter tasks by name or title.")
view = df if topic == "(all)" else df[df.topic == topic]
if query:
    q = query.lower()
    view = view[view.task.str.contains(q) | view.title.str.lower().str.contains(q)]
st.dataframe(view, hide_index=True, width="stretch")
st.caption(f"Groups by gold-path length (mean over the first test variations): Short <= "
           f"{cfg.eval.short_max_gold_len} steps, Medium {cfg.eval.short_max_gold_len + 1}-"
           f"{cfg.eval.medium_max_gold_len}, Long > {cfg.eval.medium_max_gold_len}. Electrical tasks run without "
           f"the `noElectricalAction` simplification.")

# the chart spans the page, one bar per task with room for its name (half a page squeezed 30 bars together)
fig = px.bar(df.sort_values("gold steps"), x="gold steps", y="task", color="group", orientation="h",
             height=26 * len(df) + 120, title="Gold-path length per task", text="gold steps")
fig.update_traces(textposition="outside", cliponaxis=False)
fig.update_layout(margin={"l": 10, "r": 40, "t": 50, "b": 40}, yaxis={"title": None, "dtick": 1},
                  legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"})
st.plotly_chart(fig, width="stretch")
name = st.selectbox("Task details", df.task.tolist(),
                    index=int(view.index[0]) if len(view) else 0)
t = cat.get(name)
st.subheader(f"{t.index}: {t.title} ({t.task_id})")
st.write(t.description)
st.markdown(f"**Variations**: {t.max_variations} in all: train {len(t.train)}, dev {len(t.dev)}, "
            f"test {len(t.test)}. Evaluation uses the first {min(cfg.eval.variations_per_task, len(t.test))} "
            f"test variations: {t.test[:cfg.eval.variations_per_task]}.")
st.markdown("**Gold-path lengths** (cached): " +
            ", ".join(f"{k} -> {v} steps" for k, v in t.gold_lengths.items()))
