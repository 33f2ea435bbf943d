"""results.json and report.md: the paper's Table 1 layout, the task-group table, the mechanism table and
the per-task table, from the metrics rows of every finished episode in an evaluation directory."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..config import EvalConfig
from ..env import catalog
from ..trace import list_traces, read_episode
from . import decision_value
from .metrics import GROUPS, MECHANISM_COLUMNS, aggregate, episode_metrics
from .paired import paired_section
from .spec import SPEC_FILE, TRACES, job_from_key

# docs/AGENT.md §8: the paper's reference run (Flan-T5-large Swift, Qwen2.5-7B-Instruct Sage on vLLM, 271 episodes)
PAPER_TABLE1 = {"baseline": (51.67, 23.99, 24.48), "amm": (53.83, 26.94, 24.03), "srm": (64.33, 41.33, 19.76),
                "full": (64.62, 43.17, 19.33)}
PRESET_LABEL = {"baseline": "Baseline", "amm": "+AMM", "srm": "+SRM", "full": "Full", "swift": "Swift alone",
                "swift-gate1": "Swift + Gate-1", "swift-srm": "Swift + SRM (no Critic)", "swift-amm": "Swift + AMM (T1)"}


def collect_rows(out: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Metrics rows of the finished traces in `out/traces`, and the unreadable or unfinished ones."""
    rows, problems = [], []
    for p in sorted(list_traces(Path(out) / TRACES)):
        try:
            ep = read_episode(p)
        except Exception as e:  # noqa: BLE001 - listed in the report, never fatal
            problems.append(f"{p}: {e}")
            continue
        if ep.summary is None:
            problems.append(f"{p}: unfinished (no summary; rerun the evaluation to redo it)")
            continue
        rows.append(episode_metrics(ep))
    return rows, problems


def build_results(out: Path, wall_s: float | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out = Path(out)
    record = json.loads((out / SPEC_FILE).read_text())
    rows, problems = collect_rows(out)
    asked = set(record.get("jobs", []))
    rows = [r for r in rows if f"{r['preset']}/{r['task']}-v{r['variation']}" in asked]
    cat = catalog()
    gold = {t.name: t.gold_length for t in cat.tasks}
    ev = EvalConfig()
    presets = aggregate(rows, gold, ev)
    order = [p for p in record["spec"].get("presets", []) if p in presets] + \
            sorted(p for p in presets if p not in record["spec"].get("presets", []))
    done = {f"{r['preset']}/{r['task']}-v{r['variation']}" for r in rows}
    missing = sorted(asked - done)
    res = {"written_at": time.strftime("%Y-%m-%d %H:%M:%S"), "settings": record["settings"], "spec": record["spec"],
           "episodes_asked": len(asked), "episodes_done": len(done), "missing": missing, "problems": problems,
           "preset_order": order, "presets": {p: presets[p] for p in order},
           "groups_by_gold_length": {"Short": f"<= {ev.short_max_gold_len}",
                                     "Medium": f"{ev.short_max_gold_len + 1}-{ev.medium_max_gold_len}",
                                     "Long": f"> {ev.medium_max_gold_len}"},
           "task_groups": {t.name: _group(t.gold_length, ev) for t in cat.tasks},
           "episodes": sorted(rows, key=lambda r: (order.index(r["preset"]) if r["preset"] in order else 99,
                                                   r["task_index"], r["variation"])),
           **(extra or {})}
    res["provenance"] = provenance(rows, order)
    res["paired"] = paired_section(rows, order)
    dv = decision_value.load(out)
    if dv is not None:  # written by benchmarks/decision_value.py: the summary here, every decision in its own file
        res["decision_values"] = {"settings": dv.get("settings", {}), "summary": dv.get("summary", {})}
    if wall_s is not None:
        res["wall_s"] = round(wall_s, 1)
    return res


def provenance(rows: list[dict[str, Any]], order: list[str]) -> dict[str, Any]:
    """Which code revisions recorded the episodes (with counts) and each preset's config hashes: one revision and
    one hash per preset is a clean evaluation; more means the numbers mix agents."""
    from collections import Counter

    from ..provenance import code_revision, describe_code, describe_machine

    label = {id(r): describe_code(r.get("code") or {}, r.get("run_id", "")) for r in rows}
    codes = Counter(label.values())
    # per preset too: an evaluation that re-plays some presets after a fix mixes revisions on purpose, and the
    # reader must see which preset ran which code
    by_preset = {p: dict(Counter(label[id(r)] for r in rows if r["preset"] == p)) for p in order}
    hashes = {p: sorted({r.get("config_hash") or "not recorded" for r in rows if r["preset"] == p}) for p in order}
    machines = Counter(describe_machine(r.get("machine") or {}) for r in rows)
    return {"code": dict(codes), "code_by_preset": by_preset, "config_hash": hashes, "machines": dict(machines),
            "report_written_by": code_revision()}


def _group(g: float, ev: EvalConfig) -> str:
    from .metrics import group_of

    return group_of(g, ev)


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.2f}%" if pct else f"{x:.2f}"


def markdown(res: dict[str, Any]) -> str:
    s = res["spec"]
    order = res["preset_order"]
    lines = [f"# Evaluation report", "",
             f"{res['episodes_done']} of {res['episodes_asked']} episodes finished; split `{s['split']}`, "
             f"step limit {s['step_limit']}, " +
             (f"{s['split']} variations {s['variation_list']}" if s.get("variation_list") else
              f"the first {s['variations']} {s['split']} variation(s) of each task") +
             (f", overrides `{' '.join(s['overrides'])}`" if s.get("overrides") else "") +
             (f"; wall time {res['wall_s'] / 60:.1f} min" if res.get("wall_s") else "") + ".", ""]
    if res.get("missing"):
        lines += [f"**Not finished yet ({len(res['missing'])}):** " + ", ".join(res["missing"][:20]) +
                  (" ..." if len(res["missing"]) > 20 else "") + " (rerun the same command to resume).", ""]
    lines += ["## Table 1: Final, Success, Steps@Succ (per task, then macro-averaged)", "",
              "| config | Final | Success | Steps@Succ | episodes | tasks | paper Final / Success / Steps@Succ |",
              "|---|---|---|---|---|---|---|"]
    for p in order:
        m = res["presets"][p]
        ref = PAPER_TABLE1.get(p)
        lines.append(f"| {PRESET_LABEL.get(p, p)} | {_f(m['final'])} | {_f(m['success'], True)} | "
                     f"{_f(m['steps_at_success'])} | {m['episodes']} | {m['tasks']} | "
                     f"{f'{ref[0]:.2f} / {ref[1]:.2f}% / {ref[2]:.2f}' if ref else '-'} |")
    lines += ["", "Final counts a negative final score as 0. The paper's numbers are its reference run (Flan-T5-large "
              "Swift, Qwen2.5-7B-Instruct Sage, 271 episodes), for shape only.", "",
              "## Task groups by gold-path length (Final / Success)", "",
              "| config | " + " | ".join(f"{g} ({res['groups_by_gold_length'][g]})" for g in GROUPS) + " |",
              "|---|" + "---|" * len(GROUPS)]
    for p in order:
        gs = res["presets"][p]["groups"]
        lines.append(f"| {PRESET_LABEL.get(p, p)} | " + " | ".join(
            f"{_f(gs[g]['final'])} / {_f(gs[g]['success'], True)} ({gs[g]['tasks']} tasks)" if g in gs else "-"
            for g in GROUPS) + " |")
    lines += ["", "## Mechanism activity (mean per episode)", "",
              "| mechanism | " + " | ".join(PRESET_LABEL.get(p, p) for p in order) + " |",
              "|---|" + "---|" * len(order)]
    for key, label in MECHANISM_COLUMNS:
        vals = [res["presets"][p]["activity"].get(key, 0.0) for p in order]
        pct = key.startswith("share")
        lines.append(f"| {label} | " + " | ".join(f"{100 * v:.1f}%" if pct else f"{v:.2f}" for v in vals) + " |")
    for name, title in (("gate1_drops", "Gate-1 drops by reason"), ("stagnation_modes", "Stagnation reports by mode"),
                        ("critic", "Critic decisions by status"), ("llm_failures", "LLM calls that failed, by kind")):
        keys = sorted({k for p in order for k in res["presets"][p]["totals"].get(name, {})})
        if not keys:
            continue
        lines += ["", f"### {title} (totals)", "", "| | " + " | ".join(PRESET_LABEL.get(p, p) for p in order) + " |",
                  "|---|" + "---|" * len(order)]
        for k in keys:
            lines.append(f"| {k} | " + " | ".join(str(res["presets"][p]["totals"][name].get(k, 0)) for p in order) + " |")
    lines += picks_markdown(res)
    lines += llm_calls_markdown(res)
    lines += paired_markdown(res)
    lines += decision_values_markdown(res)
    tasks = {}
    for p in order:
        for t, v in res["presets"][p]["per_task"].items():
            tasks.setdefault(t, {})[p] = v
    lines += ["", "## Per task (Final, successes in brackets)", "",
              "| # | task | group | " + " | ".join(PRESET_LABEL.get(p, p) for p in order) + " |",
              "|---|---|---|" + "---|" * len(order)]
    for t, vs in sorted(tasks.items(), key=lambda kv: next(iter(kv[1].values()))["task_index"]):
        idx = next(iter(vs.values()))["task_index"]
        lines.append(f"| {idx} | {t} | {res['task_groups'].get(t, '')} | " + " | ".join(
            f"{vs[p]['final']:.1f} ({round(vs[p]['success'] * vs[p]['episodes'])}/{vs[p]['episodes']})"
            if p in vs else "-" for p in order) + " |")
    lines += provenance_markdown(res.get("provenance") or {})
    errors = [(p, e) for p in order for e in res["presets"][p]["errors"]]
    if errors or res.get("problems"):
        lines += ["", "## Errors", ""]
        lines += [f"- {p} {e['task']} v{e['variation']}: {e['error']}" for p, e in errors]
        lines += [f"- {x}" for x in res.get("problems", [])]
    return "\n".join(lines) + "\n"


def provenance_markdown(prov: dict[str, Any]) -> list[str]:
    if not prov:
        return []
    lines = ["", "## Provenance", "", "Recorded by code: " + ", ".join(
        f"{k} ({v} episodes)" for k, v in prov.get("code", {}).items()) + ".",
        "Config hash per preset: " + "; ".join(f"{PRESET_LABEL.get(p, p)} {', '.join(h)}"
                                               for p, h in prov.get("config_hash", {}).items()) + "."]
    if prov.get("machines"):
        lines.append("Played on: " + ", ".join(f"{k} ({v} episodes)" for k, v in prov["machines"].items()) + ".")
    mixed = mixed_code_line(prov)
    if mixed:
        lines.append(f"**Warning:** {mixed}")
    return lines


def mixed_code_line(prov: dict[str, Any]) -> str | None:
    """One sentence naming each preset's code revision(s) when the episodes were not all recorded by one."""
    if len(prov.get("code", {})) <= 1:
        return None
    return "the episodes were recorded by more than one code revision. By preset: " + "; ".join(
        f"{PRESET_LABEL.get(p, p)} " + ", ".join(f"{k} ({v})" for k, v in c.items())
        for p, c in prov.get("code_by_preset", {}).items() if c) + "."


def picks_markdown(res: dict[str, Any]) -> list[str]:
    """Where Sage's picks stood in the list as the model read it (alphabetical when it scores the options): a model
    that chooses by meaning spreads them; one that answers by position piles them on one number. Then what the
    scored picks follow: the verb `move`, the longest option, Swift's own top choice, each against its chance."""
    order = [p for p in res["preset_order"] if res["presets"][p]["totals"].get("sage_picks")]
    if not order:
        return []
    totals = {p: res["presets"][p]["totals"]["sage_picks"] for p in order}
    keys = sorted({k for t in totals.values() for k in t}, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0))
    lines = ["", "### Sage's picks by their position in the list as the model read it (totals)", "",
             "| position | " + " | ".join(PRESET_LABEL.get(p, p) for p in order) + " |", "|---|" + "---|" * len(order)]
    for k in keys:
        lines.append(f"| {'a command of its own' if k == 'own' else k} | " +
                     " | ".join(str(totals[p].get(k, 0)) for p in order) + " |")

    def largest(t: dict[str, int]) -> str:
        k = min(t, key=lambda k: (-t[k], keys.index(k)))  # a tie: the first position
        return f"{100 * t[k] / sum(t.values()):.0f}% ({'its own commands' if k == 'own' else f'position {k}'})"

    lines.append("| **largest share** | " + " | ".join(largest(t) for t in totals.values()) + " |")
    bias = {p: res["presets"][p]["totals"].get("sage_pick_bias") or {} for p in order}
    if any(b.get("picks") for b in bias.values()):
        def share(b: dict, k: str, of: str, chance: str) -> str:
            n = b.get(of, 0)
            return f"{100 * b.get(k, 0) / n:.0f}% (chance {100 * b.get(chance, 0) / n:.0f}%)" if n else "-"
        lines += ["", "Scored picks (the list in alphabetical order) that are ...", "",
                  "| pick | " + " | ".join(PRESET_LABEL.get(p, p) for p in order) + " |",
                  "|---|" + "---|" * len(order),
                  "| a `move ...` command (share offered) | " +
                  " | ".join(share(b, "move", "picks", "move_offered") for b in bias.values()) + " |",
                  "| the longest option | " +
                  " | ".join(share(b, "longest", "picks", "longest_chance") for b in bias.values()) + " |",
                  "| Swift's own top choice (when offered) | " +
                  " | ".join(share(b, "swift_top", "swift_top_offered", "swift_top_chance") for b in bias.values())
                  + " |"]
    return lines


def decision_values_markdown(res: dict[str, Any]) -> list[str]:
    """What each mechanism's decisions changed against the road not taken (agent_core.evaluate.decision_value)."""
    dv = res.get("decision_values") or {}
    summary = dv.get("summary") or {}
    if not summary:
        return []
    st = dv.get("settings") or {}
    lines = ["", "## Decision values: what each decision changed against the road not taken", "",
             f"Two rollouts from the state before each decision, under the same continuation "
             f"({decision_value.POLICY_WORDS.get(st.get('policy', 'swift'), st.get('policy'))} for {st.get('horizon', '?')} more steps, or to the step limit): one plays "
             f"the mechanism's action, the other the action it replaced. Value: the first's score at the end less the "
             f"second's (a lost game counts 0). Decisions whose two branches start alike changed nothing and are "
             f"counted apart. {st.get('note', '')}".rstrip(), "",
             "| mechanism | against | decisions | changed | mean [95% CI] | wins / losses / ties | "
             "Short | Medium | Long |", "|---|---|---|---|---|---|---|---|---|"]

    def ci(x: dict) -> str:
        if not x.get("n"):
            return "-"
        if x.get("low") is None:
            return f"{x['mean']:+.2f} (n {x['n']})"
        return f"{x['mean']:+.2f} [{x['low']:+.2f}, {x['high']:+.2f}] (n {x['n']})"

    for mech, row in summary.items():
        g = row.get("by_group", {})
        lines.append(f"| {row['label']} | {row['instead']} | {row['decisions']} | {row['n']} | {ci(row)} | "
                     f"{row['wins']} / {row['losses']} / {row['ties']} | " +
                     " | ".join(ci(g[k]) if k in g else "-" for k in ("Short", "Medium", "Long")) + " |")
    presets = sorted({p for row in summary.values() for p in row.get("by_preset", {})})
    if presets:
        lines += ["", "By preset (mean [95% CI] (n)):", "",
                  "| mechanism | " + " | ".join(PRESET_LABEL.get(p, p) for p in presets) + " |",
                  "|---|" + "---|" * len(presets)]
        for mech, row in summary.items():
            bp = row.get("by_preset", {})
            lines.append(f"| {row['label']} | " + " | ".join(ci(bp[p]) if p in bp else "-" for p in presets) + " |")
    return lines


def llm_calls_markdown(res: dict[str, Any]) -> list[str]:
    """Every preset's LLM calls and how many failed, stated even when none did: a timed-out call hands its step to
    Swift, so an evaluation of the agent should have none."""
    parts = []
    for p in res["preset_order"]:
        t = res["presets"][p]["totals"]
        calls, fails = sum(t.get("llm_calls", {}).values()), t.get("llm_failures", {})
        if calls:
            parts.append(f"{PRESET_LABEL.get(p, p)} {calls} ({fails.get('timeout', 0)} timed out, "
                         f"{fails.get('other', 0)} failed otherwise)")
    return ["", "**LLM calls:** " + "; ".join(parts) + "."] if parts else []


def paired_markdown(res: dict[str, Any]) -> list[str]:
    """The paired comparison against Baseline (agent_core/evaluate/paired.py), in words and tables."""
    paired = res.get("paired") or {}
    if not paired:
        return []
    ref = PRESET_LABEL.get(next(iter(paired.values()))["reference"], "the reference")
    lines = ["", f"## Paired against {ref} (same task and variation)", "",
             f"Each preset's Final minus {ref}'s on the same task-variation; the interval is a 95% t-interval of "
             "the mean difference. A pair *diverged* when the two episodes took a different action somewhere.", "",
             "A loss *decided by a design rule* parted at a step where code (Gate-1, the safeguard, a trigger, the "
             "loop guard) overrode the agent; a loss *after a saved step* parted where Gate-1 dropped an action that "
             f"{ref} played there and the game rejected or took without changing anything (the same score, room "
             "and inventory: the rule spared a wasted step; what followed was each agent's own choice in the same "
             "world).", "",
             "| config | pairs | mean difference [95% interval] | diverged | losses decided by a design rule "
             "| losses after a saved step |",
             "|---|---|---|---|---|---|"]
    for p, d in paired.items():
        iv = d["interval"]
        sure = " (excludes 0)" if iv.get("excludes_zero") else ""
        lines.append(f"| {PRESET_LABEL.get(p, p)} | {iv['n']} | {iv['mean']:+.2f} [{iv['low']:+.2f}, "
                     f"{iv['high']:+.2f}]{sure} | {d['diverged']} | {d['rule_losses']} | "
                     f"{d.get('saved_losses', '—')} |")  # — : written before saved steps were told apart
    across = {p: d.get("across_machines", 0) for p, d in paired.items() if d.get("across_machines")}
    if across:
        lines += ["", "**Pairs played on different machines:** " + ", ".join(
            f"{PRESET_LABEL.get(p, p)} {n}" for p, n in across.items()) + ". The same code can rank another action "
            "first on another CPU (its vector kernels round differently), so in these pairs the difference mixes "
            "the mechanism with the machine."]
    lines += ["", "### Where the divergent pairs parted (first divergent step, by the mechanism that decided it)", "",
              "| config | mechanism | kind | pairs | gained | lost | total Final change |", "|---|---|---|---|---|---|---|"]
    for p, d in paired.items():
        for m, v in d["by_mechanism"].items():
            lines.append(f"| {PRESET_LABEL.get(p, p)} | {m} | {v['kind']} | {v['pairs']} | {v['gained']} | "
                         f"{v['lost']} | {v['change']:+.1f} |")
    lines += ["", "### Divergent pairs", "", f"| config | task | v | {ref} | preset | step | mechanism | what |",
              "|---|---|---|---|---|---|---|---|"]
    for p, d in paired.items():
        for r in d["rows"]:
            if r["diverged_at"] is None:
                continue
            lines.append(f"| {PRESET_LABEL.get(p, p)} | {r['task']} | {r['variation']} | {r['final_ref']:g} | "
                         f"{r['final']:g} | {r['diverged_at']} | {r['mechanism']} ({r['kind']}) | "
                         f"{r['detail'][:140].replace('|', '/')} |")
    return lines


def write_reports(out: Path, wall_s: float | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    res = build_results(out, wall_s, extra)
    for name, text in (("results.json", json.dumps(res, indent=1, default=str)), ("report.md", markdown(res))):
        tmp = Path(out) / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(Path(out) / name)
    return res


def load_results(out: Path) -> dict[str, Any]:
    """results.json if it is there and current, else computed from the traces (an evaluation still running)."""
    out = Path(out)
    if not (out / SPEC_FILE).exists():
        raise FileNotFoundError(f"{out} is not an evaluation directory (no {SPEC_FILE})")
    return build_results(out)


__all__ = ["build_results", "collect_rows", "job_from_key", "load_results", "markdown", "write_reports"]
