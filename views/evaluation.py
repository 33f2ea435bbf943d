"""The Evaluate page's tables and charts, from an evaluation's results (agent_core.evaluate)."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from agent_core.evaluate.metrics import GROUPS, MECHANISM_COLUMNS
from agent_core.evaluate.report import PAPER_TABLE1, PRESET_LABEL

from .common import html_text

PRESET_COLORS = {"baseline": "#1f77b4", "amm": "#129aa8", "srm": "#dd6b00", "full": "#2ca02c"}
_MORE = ("#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


def preset_color(p: str, order: list[str]) -> str:
    return PRESET_COLORS.get(p) or _MORE[order.index(p) % len(_MORE)] if p in order else "#999"


def label(p: str) -> str:
    return PRESET_LABEL.get(p, p)


def table1(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in res["preset_order"]:
        m = res["presets"][p]
        ref = PAPER_TABLE1.get(p)
        out.append({"config": label(p), "Final": round(m["final"], 2), "Success %": round(100 * m["success"], 2),
                    "Steps@Succ": None if m["steps_at_success"] is None else round(m["steps_at_success"], 2),
                    "episodes": m["episodes"], "tasks": m["tasks"], "ended < 0": m["ended_negative"],
                    "paper Final": ref[0] if ref else None, "paper Success %": ref[1] if ref else None})
    return out


def group_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in res["preset_order"]:
        row: dict[str, Any] = {"config": label(p)}
        for g in GROUPS:
            gm = res["presets"][p]["groups"].get(g)
            row[f"{g} Final"] = round(gm["final"], 2) if gm else None
            row[f"{g} Success %"] = round(100 * gm["success"], 1) if gm else None
            row[f"{g} tasks"] = gm["tasks"] if gm else 0
        out.append(row)
    return out


def mechanism_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, name in MECHANISM_COLUMNS:
        row: dict[str, Any] = {"mechanism (mean per episode)": name}
        for p in res["preset_order"]:
            v = res["presets"][p]["activity"].get(key, 0.0)
            row[label(p)] = f"{100 * v:.1f}%" if key.startswith("share") else f"{v:.2f}"  # one type per column
        out.append(row)
    return out


def _bars(res: dict[str, Any], xs: list[str], value, title: str, ytitle: str, height: int = 360) -> go.Figure:
    fig = go.Figure()
    order = res["preset_order"]
    for p in order:  # task and preset names come from the traces; Plotly renders its labels as HTML
        fig.add_bar(name=html_text(label(p)), x=[html_text(x) for x in xs], y=[value(p, x) for x in xs],
                    marker_color=preset_color(p, order))
    fig.update_layout(barmode="group", title=title, height=height, margin={"l": 10, "r": 10, "t": 60, "b": 10},
                      legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 1.0, "xanchor": "right"},
                      yaxis={"title": ytitle})
    return fig


def final_per_task_figure(res: dict[str, Any]) -> go.Figure:
    tasks: dict[str, int] = {}
    for p in res["preset_order"]:
        for t, v in res["presets"][p]["per_task"].items():
            tasks[t] = v["task_index"]
    xs = sorted(tasks, key=tasks.get)
    fig = _bars(res, xs, lambda p, t: res["presets"][p]["per_task"].get(t, {}).get("final"),
                "Final score per task", "Final (negative counted as 0)", 420)
    fig.update_xaxes(tickangle=-45)
    return fig


def groups_figure(res: dict[str, Any]) -> go.Figure:
    return _bars(res, list(GROUPS), lambda p, g: res["presets"][p]["groups"].get(g, {}).get("final"),
                 "Final by task group (gold-path length)", "Final")


def mechanism_figure(res: dict[str, Any]) -> go.Figure:
    keys = [(k, n) for k, n in MECHANISM_COLUMNS if not k.startswith("share")]
    keys = [(k, n) for k, n in keys if any(res["presets"][p]["activity"].get(k, 0) for p in res["preset_order"])]
    fig = _bars(res, [n for _k, n in keys],
                lambda p, n: res["presets"][p]["activity"].get(dict((v, k) for k, v in keys)[n], 0.0),
                "Mechanism activity (mean per episode)", "count per episode", 420)
    fig.update_xaxes(tickangle=-30)
    return fig


def episode_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in res["episodes"]:
        a = r.get("activity", {})
        out.append({"preset": r["preset"], "#": r["task_index"], "task": r["task"], "variation": r["variation"],
                    "final": r["raw_final"], "success": bool(r["success"]), "steps": r["steps"], "ended": r["reason"],
                    "Sage calls": a.get("system2_calls", 0), "Critic": a.get("critic_calls", 0),
                    "Gate-1 drops": a.get("gate1_drops", 0), "T1": a.get("T1", 0), "T4": a.get("T4", 0),
                    "seconds": round(r.get("seconds", 0.0), 1), "trace": r["trace"]})
    return out


def paired_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per preset: its paired difference against Baseline (agent_core/evaluate/paired.py)."""
    out = []
    for p, d in (res.get("paired") or {}).items():
        iv = d["interval"]
        out.append({"config": label(p), "pairs": iv["n"], "mean difference": iv["mean"],
                    "95% interval": f"[{iv['low']:+.2f}, {iv['high']:+.2f}]",
                    "excludes 0": bool(iv.get("excludes_zero")), "diverged": d["diverged"],
                    "losses by a design rule": d["rule_losses"],
                    "losses after a saved step": d.get("saved_losses"),  # None: an older results.json
                    "pairs on two machines": d.get("across_machines")})
    return out


def attribution_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Every divergent pair: where it parted from Baseline, what decided that step, and the change in Final."""
    out = []
    for p, d in (res.get("paired") or {}).items():
        for r in d["rows"]:
            if r["diverged_at"] is None:
                continue
            out.append({"config": label(p), "task": r["task"], "variation": r["variation"],
                        "reference": r["final_ref"], "preset": r["final"], "change": r["diff"],
                        "step": r["diverged_at"], "mechanism": r["mechanism"], "kind": r["kind"],
                        "what": r["detail"], "trace": r["trace"], "trace_ref": r["trace_ref"]})
    return out


def _ci(x: dict[str, Any]) -> str:
    if not x.get("n"):
        return "-"
    if x.get("low") is None:
        return f"{x['mean']:+.2f} (one decision)"
    return f"{x['mean']:+.2f} [{x['low']:+.2f}, {x['high']:+.2f}]"


def decision_value_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per mechanism: what its decisions changed against the road not taken (decision_values.json)."""
    out = []
    for mech, r in ((res.get("decision_values") or {}).get("summary") or {}).items():
        g = r.get("by_group", {})
        out.append({"mechanism": r["label"], "against": r["instead"], "decisions": r["decisions"],
                    "changed the action": r["n"], "mean value [95% CI]": _ci(r), "won": r["wins"], "lost": r["losses"],
                    "tied": r["ties"], "excludes 0": bool(r["n"] > 1 and r.get("low") is not None and
                                                         (r["low"] > 0 or r["high"] < 0)),
                    **{k: _ci(g[k]) if k in g else "-" for k in ("Short", "Medium", "Long")}})
    return out


def decision_value_figure(res: dict[str, Any]) -> go.Figure:
    """Each mechanism's mean decision value with its 95% interval, per preset."""
    summary = (res.get("decision_values") or {}).get("summary") or {}
    order = res.get("preset_order", [])
    fig = go.Figure()
    presets = [p for p in order if any(p in r.get("by_preset", {}) for r in summary.values())]
    for p in presets:
        xs, ys, lo, hi, ns = [], [], [], [], []
        for r in summary.values():
            x = r.get("by_preset", {}).get(p)
            if not x or not x.get("n"):
                continue
            xs.append(r["label"])
            ys.append(x["mean"])
            lo.append(x["mean"] - x["low"] if x.get("low") is not None else 0)
            hi.append(x["high"] - x["mean"] if x.get("high") is not None else 0)
            ns.append(x["n"])
        fig.add_bar(x=xs, y=ys, name=label(p), marker_color=preset_color(p, order),
                    error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
                    hovertext=[f"{label(p)} · {x}: {y:+.2f} over {n} decisions" for x, y, n in zip(xs, ys, ns)],
                    hoverinfo="text")
    fig.add_hline(y=0, line_width=1, line_color="#888")
    fig.update_layout(barmode="group", height=360, margin={"l": 10, "r": 10, "t": 30, "b": 30},
                      yaxis={"title": "score difference at the horizon"}, legend={"orientation": "h", "y": 1.12})
    return fig


def decision_rows(data: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every measured decision: where, what it played, against what, both branches' scores and the value."""
    out = []
    for d in (data or {}).get("decisions", []):
        out.append({"mechanism": d["mechanism"], "preset": d["preset"], "task": d["task"], "variation": d["variation"],
                    "step": d["step"], "played": d["with_first"] or d["played"],
                    "instead": d["without_first"] or d["instead"] or "", "with": d["with_final"],
                    "without": d["without_final"], "value": d["value"],
                    "note": d["error"] or ("the same action: changed nothing" if d["value"] is None else d["detail"]),
                    "trace": d["trace"], "with_path": d["with_path"], "without_path": d["without_path"]})
    return out
