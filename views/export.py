"""One recorded episode as a single self-contained HTML file: no server, no network (Plotly's JavaScript is
inlined), opens offline in any browser. A step slider (and the keys ← → and space), the narration, the
action and who chose it, the observation, Sage's plan and buffer, Gate-1's decisions, the retrievals with
their recency / importance / relevance bars, and the score chart with a cursor.

    .venv/bin/python -m views.export runs/<trace>.jsonl episode.html
"""
from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from agent_core.palette import ACTOR_COLORS, ACTOR_LABELS, SCORE_LINE, text_on
from agent_core.trace import Episode, StepRecord, read_episode

from .common import decision_rows
from .narration import narrate

SCORE_PARTS = (("recency_n", "recency", "#4C78A8"), ("importance_n", "importance", "#d4700b"),
               ("relevance_n", "relevance", "#54A24B"))


def _step_data(rec: StepRecord, header) -> dict[str, Any]:
    """What the page shows for one step (a compact copy of the record)."""
    retrievals = []
    for x in rec.retrievals:
        cands = []
        if x.result is not None:
            for c in x.result.candidates[:5]:
                cands.append({"id": c.id, "tag": c.tag or c.type, "text": c.description[:220],
                              "parts": [round(getattr(c, k) * (x.result.weights or {}).get(k[:-2], 1.0), 3)
                                        for k, _n, _c in SCORE_PARTS],
                              "score": round(c.score, 3), "injected": c.id in x.injected_ids})
        retrievals.append({"trigger": x.trigger, "why": x.why, "into": x.injected_into, "error": x.error or "",
                           "candidates": cands})
    return {
        "step": rec.step, "action": rec.action, "system": rec.system,
        "who": ACTOR_LABELS.get(rec.system, rec.system), "color": ACTOR_COLORS.get(rec.system, "#777"),
        "ink": text_on(ACTOR_COLORS.get(rec.system, "#777777")),
        "narration": " ".join(narrate(rec, header)), "observation": rec.observation, "room": rec.room,
        "inventory": rec.inventory, "score": rec.score, "reward": rec.reward,
        "trigger": rec.trigger.rule if rec.trigger else "", "plan": rec.plan, "buffer": rec.buffer_after,
        "gate1": [{"proposed": g.proposed, "decision": g.decision, "result": g.result or "", "reason": g.reason,
                   "detail": g.detail, "source": g.source} for g in rec.gate1],
        "retrievals": retrievals,
        "critic": ({"status": rec.critic.status, "diagnosis": rec.critic.diagnosis, "admitted": rec.critic.admitted,
                    "reason": rec.critic.reason} if rec.critic else None),
        "stagnation": rec.stagnation.modes if rec.stagnation else [],
        "llm_errors": [c.error for c in rec.llm_calls if c.error],
        "decisions": [f"{label}: {text}" for label, text in decision_rows(rec)],
    }


def _branch_scatter(fig: go.Figure, drawn, step: int) -> list[int]:
    """The roads not taken at `step` as hidden dashed lines (the page shows those of the step it shows); their
    indices in the figure."""
    from .branches import branch_traces
    from .charts import BRANCH_COLORS

    idx = []
    for i, b in enumerate(branch_traces(drawn)):
        xs = list(range(b["step"], b["step"] + len(b["scores"]) + 1))
        ys = [b["start"]] + list(b["scores"])
        idx.append(len(fig.data))
        fig.add_scatter(x=xs, y=ys, mode="lines+markers", visible=False, name=html.escape(b["label"][:60]),
                        line={"color": SCORE_LINE if b["played"] else BRANCH_COLORS[i % len(BRANCH_COLORS)],
                              "width": 2, "dash": "dot" if b["played"] else "dash"}, marker={"size": 4},
                        hovertext=[f"{html.escape(b['label'][:60])}<br>step {x}: score {y:g}" for x, y in zip(xs, ys)],
                        hoverinfo="text")
    return idx


def _score_figure(ep: Episode) -> go.Figure:
    xs = [0] + [r.step for r in ep.steps]
    ys = [0.0] + [r.score for r in ep.steps]
    fig = go.Figure()
    fig.add_scatter(x=xs, y=ys, mode="lines+markers", name="score", line={"color": SCORE_LINE, "width": 2.5},
                    marker={"size": 6, "color": ["#999"] + [ACTOR_COLORS.get(r.system, "#777") for r in ep.steps]},
                    hovertext=["start"] + [f"step {r.step}: {r.score:g} · "
                                           f"{html.escape(str(ACTOR_LABELS.get(r.system, r.system)))} · "
                                           f"{html.escape(r.action[:60])}" for r in ep.steps], hoverinfo="text")
    fig.update_layout(height=260, margin={"l": 40, "r": 10, "t": 10, "b": 30}, showlegend=False,
                      yaxis={"title": "score", "range": [min([0.0] + ys) - 5, 116]},
                      xaxis={"title": "step", "range": [-0.5, max(len(ep.steps), 5) + 0.5]},
                      shapes=[{"type": "line", "x0": 0, "x1": 0, "y0": 0, "y1": 1, "yref": "paper",
                               "line": {"dash": "dot", "color": SCORE_LINE, "width": 2}}])
    return fig


def episode_html(ep: Episode, branches: dict | None = None) -> str:
    """`branches`: {step shown: [(label, rollout)]} (views.branches.episode_branches): the roads not taken that
    were rolled out, drawn on the chart at their step with a sentence each."""
    from .branches import sentences

    h = ep.header
    preset = (h.config or {}).get("preset", "?") if isinstance(h.config, dict) else "?"
    end = (f"{ep.summary.reason}, final score {ep.summary.final_score:g}" if ep.summary else "unfinished")
    data = {"task": h.task, "variation": h.variation, "preset": preset, "description": h.task_description,
            "end": end, "mechanisms": h.mechanisms, "initial": h.initial_observation[:600],
            "steps": [_step_data(r, h) for r in ep.steps],
            "parts": [[n, c] for _k, n, c in SCORE_PARTS], "roads": {}}
    figure = _score_figure(ep)
    for step, drawn in sorted((branches or {}).items()):
        data["roads"][str(step)] = {"traces": _branch_scatter(figure, drawn, step),
                                    "sentences": sentences(drawn, step)}
    fig = figure.to_json()
    title = f"{h.task} v{h.variation} · {preset} · SwiftSage Explorer"
    parts = {"__TITLE__": html.escape(title), "__PLOTLY__": get_plotlyjs(),
             "__DATA__": script_json(json.dumps(data, ensure_ascii=False)), "__FIG__": script_json(fig)}
    # one pass over the template: a placeholder's name inside the episode's own text is never replaced
    return re.sub("|".join(parts), lambda m: parts[m.group(0)], _TEMPLATE)


def script_json(text: str) -> str:
    """JSON text to embed in an inline <script>: every `<`, `>` and `&` (which JSON has only inside strings) as a
    \\u escape, so no string in it can end the script (`</script>`) or open a comment (`<!--`) that changes where
    the parser finds its end; U+2028 and U+2029 too (line terminators in older JavaScript)."""
    for ch, sub in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        text = text.replace(ch, sub)
    return text


def export_episode(trace: str | Path, out: str | Path) -> Path:
    from .branches import episode_branches

    ep = read_episode(trace, tolerant=True)
    out = Path(out)
    out.write_text(episode_html(ep, episode_branches(ep)), encoding="utf-8")
    return out


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#222;background:#fafafa}
 header{padding:14px 24px;background:#fff;border-bottom:1px solid #ddd}
 h1{font-size:1.35rem;margin:0 0 4px 0} .sub{color:#555;font-size:.9rem}
 main{padding:12px 24px;max-width:1200px}
 .controls{display:flex;gap:10px;align-items:center;margin:10px 0}
 .controls input[type=range]{flex:1} button{padding:4px 12px;font-size:1rem}
 .narration{border-left:5px solid #888;background:#fff;padding:10px 14px;font-size:1.1rem;margin:8px 0}
 .grid{display:grid;grid-template-columns:1fr 1fr;gap:14px} .card{background:#fff;border:1px solid #e3e3e3;
 border-radius:6px;padding:10px 12px} .card h3{margin:0 0 6px 0;font-size:1rem}
 .badge{color:#fff;border-radius:10px;padding:2px 9px;font-size:.85rem}
 pre{white-space:pre-wrap;margin:0;font-size:.88rem} .muted{color:#777;font-size:.85rem}
 .bar{display:flex;height:12px;width:260px;border:1px solid #ccc;margin:2px 0} .bar span{display:block;height:100%}
 .mem{margin:6px 0;padding:4px 0;border-top:1px dashed #ddd;font-size:.85rem} .inj{font-weight:600}
 .ACCEPT{color:#2ca02c} .REPAIR{color:#d68a00} .DROP{color:#d62728}
 .help{color:#666;font-size:.8rem;margin-left:8px}
</style></head><body>
<header><h1 id="title"></h1><div class="sub" id="sub"></div></header>
<main>
 <div class="controls"><button id="prev" title="previous step (←)">◀</button>
  <input id="slider" type="range" min="0" value="0" aria-label="Step">
  <button id="next" title="next step (→)">▶</button><button id="play" title="play / pause (space)">▶ play</button>
  <span id="pos"></span><span class="help">keys: ← → step, space play</span></div>
 <div class="narration" id="narration" aria-live="polite"></div>
 <div id="score"></div>
 <div class="grid">
  <div class="card"><h3>Action</h3><div id="action"></div><h3 style="margin-top:10px">Observation</h3>
   <pre id="obs"></pre><div class="muted" id="room"></div></div>
  <div class="card"><h3>Sage's plan (Q1-Q5)</h3><div id="plan"></div><h3 style="margin-top:10px">Action buffer</h3>
   <div id="buffer"></div></div>
  <div class="card"><h3>Gate-1</h3><div id="gate1"></div><h3 style="margin-top:10px">Self-reflection and decisions</h3>
   <div id="srm"></div></div>
  <div class="card"><h3>Memory retrievals</h3><div id="mem"></div></div>
 </div>
 <div class="card" style="margin-top:14px"><h3>Roads not taken</h3><div id="roads"></div>
  <div class="muted">From the state before this step, the action played and its alternatives were each played out
  in a copy of the game, Swift alone playing on. For looking back only: the agent never looks ahead when it plays.
  </div></div>
 <p class="muted">Exported from SwiftSage Explorer: one file, no server. Everything here comes from the episode's
 step records.</p>
</main>
<script>__PLOTLY__</script>
<script>
const D = __DATA__;
const FIG = __FIG__;
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s == null ? "" : s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\\"":"&quot;"}[c]));
$("title").textContent = `${D.task} · variation ${D.variation} · preset ${D.preset}`;
$("sub").textContent = `${D.description} — ${D.steps.length} steps, ${D.end}. Running: ${D.mechanisms.join(", ")}`;
const slider = $("slider"); slider.max = D.steps.length;
Plotly.newPlot("score", FIG.data, FIG.layout, {displayModeBar: false, responsive: true});
function show(t) {
  t = Math.max(0, Math.min(D.steps.length, t)); slider.value = t;
  $("pos").textContent = `step ${t} of ${D.steps.length}`;
  Plotly.relayout("score", {"shapes[0].x0": t, "shapes[0].x1": t});
  const road = D.roads[String(t)];
  const all = Object.values(D.roads).flatMap(r => r.traces);
  if (all.length) Plotly.restyle("score", {visible: all.map(i => !!road && road.traces.includes(i))}, all);
  $("roads").innerHTML = road ? "<ul>" + road.sentences.map(x => `<li>${esc(x)}</li>`).join("") + "</ul>"
    : '<span class="muted">none rolled out at this step</span>';
  if (t === 0) {
    $("narration").textContent = "The episode starts. " + D.initial.slice(0, 300);
    $("narration").style.borderLeftColor = "#888";
    for (const id of ["action","obs","room","plan","buffer","gate1","srm","mem"]) $(id).innerHTML = "";
    return;
  }
  const s = D.steps[t - 1];
  $("narration").textContent = s.narration; $("narration").style.borderLeftColor = s.color;
  $("action").innerHTML = `<span class="badge" style="background:${s.color};color:${s.ink}">${esc(s.who)}</span> <code>${esc(s.action)}</code>`
    + (s.trigger ? `<div class="muted">why: ${esc(s.trigger)}</div>` : "")
    + s.llm_errors.map(e => `<div class="DROP">LLM error: ${esc(e)}</div>`).join("");
  $("obs").textContent = s.observation;
  $("room").textContent = `room: ${s.room} · score ${s.score} (${s.reward >= 0 ? "+" : ""}${s.reward})`;
  const plan = Object.entries(s.plan || {});
  $("plan").innerHTML = plan.length ? plan.map(([q, a]) => `<div><b>${esc(q)}</b> ${esc(a)}</div>`).join("")
    : '<span class="muted">Sage has not planned yet.</span>';
  $("buffer").innerHTML = s.buffer.length ? "<ol>" + s.buffer.map(a => `<li><code>${esc(a)}</code></li>`).join("") + "</ol>"
    : '<span class="muted">empty: Swift proposes the next action</span>';
  $("gate1").innerHTML = s.gate1.length ? s.gate1.map(g => `<div><span class="${esc(g.decision)}">${esc(g.decision)}</span>
    <code>${esc(g.proposed)}</code>${g.result && g.result !== g.proposed ? " → <code>" + esc(g.result) + "</code>" : ""}
    <span class="muted">${esc(g.reason)}: ${esc(g.detail)}</span></div>`).join("")
    : '<span class="muted">Gate-1 did not check anything at this step (off in this preset, or nothing to check).</span>';
  const srm = [];
  if (s.stagnation.length) srm.push(`stagnation report: ${esc(s.stagnation.join(", "))}`);
  if (s.critic) srm.push(`Critic ${esc(s.critic.status)}: ${esc(s.critic.diagnosis || s.critic.reason)}`
    + (s.critic.admitted.length ? " → " + s.critic.admitted.map(a => "<code>" + esc(a) + "</code>").join(", ") : ""));
  (s.decisions || []).forEach(d => srm.push(`<span class="muted">decision</span> ${esc(d)}`));
  $("srm").innerHTML = srm.length ? srm.join("<br>") : '<span class="muted">nothing at this step</span>';
  $("mem").innerHTML = s.retrievals.length ? s.retrievals.map(r => `<div><b>${esc(r.trigger)}</b>
    ${r.into ? "→ injected into " + esc(r.into) : "(retrieved and logged)"} <span class="muted">${esc(r.why)}</span>
    ${r.error ? '<div class="DROP">' + esc(r.error) + "</div>" : ""}
    ${r.candidates.map(c => `<div class="mem ${c.injected ? "inj" : ""}">${c.injected ? "▶ " : ""}${esc(c.tag)} · score ${c.score}
      <div class="bar" title="recency / importance / relevance">${c.parts.map((p, i) =>
        `<span style="width:${Math.max(0, p) / 3 * 100}%;background:${D.parts[i][1]}" title="${D.parts[i][0]} ${p}"></span>`).join("")}</div>
      <div class="muted">${esc(c.text)}</div></div>`).join("")}</div>`).join("")
    : '<span class="muted">no memory was read at this step</span>';
}
let timer = null;
function play() {
  if (timer) { clearInterval(timer); timer = null; $("play").textContent = "▶ play"; return; }
  if (+slider.value >= D.steps.length) show(0);
  $("play").textContent = "⏸ pause";
  timer = setInterval(() => { if (+slider.value >= D.steps.length) return play(); show(+slider.value + 1); }, 1500);
}
slider.addEventListener("input", () => show(+slider.value));
$("prev").onclick = () => show(+slider.value - 1); $("next").onclick = () => show(+slider.value + 1);
$("play").onclick = play;
document.addEventListener("keydown", (e) => {
  if (e.target === slider && (e.key === "ArrowLeft" || e.key === "ArrowRight")) return;  // the slider moves itself
  if (e.key === "ArrowRight") show(+slider.value + 1); else if (e.key === "ArrowLeft") show(+slider.value - 1);
  else if (e.key === " ") { e.preventDefault(); play(); }
});
show(0);
</script></body></html>
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = export_episode(args[0], args[1])
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
