"""Self-reflection (SRM) on the Run page: Gate-1, the ambiguity menu, the stagnation report, the Critic.

Each card reads one part of a step record (agent_core.trace: Gate1Decision, MenuChoice, StagnationReport,
CriticCall) and says it in words; a card is drawn only when the episode's header says the mechanism ran
(EpisodeHeader.mechanisms), so a baseline run shows a single line instead.
"""
from __future__ import annotations

import re
from typing import Any

import streamlit as st

from agent_core.actions import action_key, strip_decorations
from agent_core.palette import GATE1_COLORS, STAGNATION_COLOR
from agent_core.trace import CriticCall, EpisodeHeader, Gate1Decision, MenuChoice, StagnationReport, StepRecord
from views.common import (SRM_MECHANISMS, WHAT, actor_color, chip, code, episode_mechanisms, esc, md_code, md_text,
                          plural, record_at)

SOURCE_LABELS = {"swift": "Swift", "sage": "Sage", "critic": "Critic", "menu": "menu answer"}
DECISION_WORDS = {"ACCEPT": "valid as written (after normalization): it runs",
                  "REPAIR": "a small, safe, deterministic fix made it valid: the repaired form runs",
                  "DROP": "not valid and not safely fixable: it never reaches the game"}
CHOOSER_WORDS = {"swift": "Swift (its own proposal was this number)",
                 "gate1": "Gate-1 (it picked the option matching the intended action)",
                 "default": "default (the first option)"}
CRITIC_STATUS = {  # status -> (words, chip colour)
    "called": ("called", actor_color("critic")),
    "failed": ("called, but the call failed", "#b22222"),
    "repeat_skipped": ("called, but it only repeated recent actions: skipped", "#7f7f7f"),
    "budget_exhausted": ("not called: its budget is used up", "#7f7f7f"),
    "cooldown": ("not called: too soon after its last call", "#7f7f7f"),
    "expired": ("not called: the stagnation report was out of date", "#7f7f7f"),
    "cancelled": ("not called: a reward came after the report", "#7f7f7f"),
    "waiting": ("not called yet: the report waits for the action buffer to empty", "#7f7f7f"),
}
POLICY_WORDS = {"replace": "they replaced what was in the buffer", "append": "they were added after what was "
                "already in the buffer"}
# Fallback words for a mode code when a report carries no explanation (e.g. SAME_OBS_3, MOVE_SPAM_4_OF_5).
MODE_WORDS = {"SAME_OBS": "the same observation came back {0} times",
              "REPEAT_ACTION": "the same action was repeated {0} times with no effect",
              "REPEAT_VERB": "the same verb was used {0} times in a row with no effect",
              "MOVE_SPAM": "{0} of the last {1} actions were moves without reaching anything new",
              "INVALID_REPEAT": "{0} actions in the window were not valid"}


# ----------------------------------------------------------------------------- words from records

def _key(action: str) -> str:
    return action_key(strip_decorations(action)[0])


def srm_on(header: EpisodeHeader) -> list[str]:
    """The SRM mechanisms that ran in this episode, in display order."""
    ran = episode_mechanisms(header)
    return [m for m in SRM_MECHANISMS if m in ran]


# srm.* field -> its rule in words ({v} is the value); fields a config lacks are skipped, so traces recorded
# with older or newer SRM settings still show what they have.
SRM_RULE_WORDS: tuple[tuple[str, str], ...] = (
    ("gate1_repair_max_edit", "**Gate-1** repairs a typo of at most {v} character edits"),
    ("gate1_nearest_min_similarity", "Gate-1 repairs a Sage / Critic action to the nearest valid action with the "
                                     "same verb only when their similarity is at least {v}"),
    ("gate1_max_swift_tries", "Gate-1 tries at most {v} of Swift's ranked candidates per step"),
    ("gate1_drops_for_sage", "{v} drops in one step hand the step to Sage"),
    ("stagnation_window", "**stagnation** is looked for over the last {v} steps"),
    ("same_observation_threshold", "stagnation: the same observation {v} times, no reward (SAME_OBS)"),
    ("repeat_action_threshold", "stagnation: the same action with the same observation {v} times (REPEAT_ACTION)"),
    ("repeat_verb_threshold", "stagnation: the same verb {v} times in a row, nothing changed (REPEAT_VERB)"),
    ("move_spam_moves", "stagnation: {v} moves in the window that reach nothing new (MOVE_SPAM)"),
    ("repeated_invalid_threshold", "stagnation: {v} invalid actions in the window (INVALID_REPEAT)"),
    ("stagnation_refire_steps", "no second stagnation report within {v} steps of the last one"),
    ("critic_budget", "**Critic**: at most {v} calls per episode"),
    ("critic_cooldown_steps", "Critic: at least {v} steps between two calls"),
    ("critic_max_actions", "Critic: at most {v} actions per call"),
    ("critic_report_ttl_steps", "Critic: a stagnation report not served within {v} steps expires"),
    ("critic_buffer_policy", "Critic: buffer policy *{v}* (replace: its actions replace what is in the buffer; "
                             "append: they go after it)"),
)


def srm_rules(config: dict[str, Any]) -> list[str]:
    """SRM's numbers in words with their config names, from the run's own configuration."""
    s = config.get("srm", {}) if isinstance(config, dict) else {}
    return [f"{words.format(v=md_text(s[key]))} ({md_code(f'srm.{key} = {s[key]}')})" for key, words in SRM_RULE_WORDS
            if key in s]  # the recorded run's values: escaped like any trace text


def mode_words(mode: str) -> str:
    """A stagnation mode code in words, from its name and numbers (used when a report has no explanation)."""
    for prefix, words in MODE_WORDS.items():
        if mode.startswith(prefix):
            nums = re.findall(r"\d+", mode) + ["?", "?"]
            return words.format(*nums)
    return mode


def stagnation_lines(rep: StagnationReport) -> list[str]:
    """Each mode in words, with its code and how often its pattern was seen."""
    lines = []
    for i, mode in enumerate(rep.modes):
        words = rep.explanation[i] if len(rep.explanation) == len(rep.modes) else mode_words(mode)
        seen = f", seen {esc(rep.counts[mode])} times" if mode in rep.counts else ""
        lines.append(f"{esc(words)} ({code(mode)}{seen})")
    if len(rep.explanation) != len(rep.modes):  # explanations that do not pair with modes: show them all
        lines += [esc(e) for e in rep.explanation]
    return lines


def critic_budget_text(used: int, budget: int) -> str:
    """'2 of 3 calls used (1 left)'."""
    if budget <= 0:
        return f"{plural(used, 'call')} used"
    return f"{used} of {budget} calls used ({max(budget - used, 0)} left)"


def config_budget(header: EpisodeHeader) -> int:
    srm = header.config.get("srm", {}) if isinstance(header.config, dict) else {}
    return int(srm.get("critic_budget", 0) or 0)


def budget_so_far(header: EpisodeHeader, records: list[StepRecord], t: int) -> str:
    """The Critic's budget as it stood after step t: the state digest of step t says it (older traces: the last
    Critic decision up to t)."""
    rec = records[t - 1] if 0 < t <= len(records) else None
    last = next((r.critic for r in reversed(records[:t]) if r.critic), None)
    used = rec.after.critic_calls if rec is not None and rec.after is not None else (last.budget_used if last else 0)
    return critic_budget_text(used, (last.budget if last and last.budget else config_budget(header)))


# ----------------------------------------------------------------------------- Gate-1

def gate1_line(g: Gate1Decision) -> str:
    """Source, proposed action, decision chip, the repaired form; below it the reason code and words."""
    src = chip(SOURCE_LABELS.get(g.source, g.source), actor_color(g.source))
    line = f"{src} {code(g.proposed)} {chip(g.decision, GATE1_COLORS.get(g.decision, '#7f7f7f'))}"
    if g.result and g.result != g.proposed:
        line += f" → {code(g.result)}"
    why = f"{code(g.reason)} {esc(g.detail)}" if g.reason else esc(g.detail)
    if g.similarity is not None:
        why += f" (similarity {g.similarity:.2f})"
    return line + (f"<br><small>{why}</small>" if why.strip() else "")


def gate1_summary(decisions: list[Gate1Decision]) -> str:
    counts = {d: sum(g.decision == d for g in decisions) for d in GATE1_COLORS}
    parts = [f"{n} {d}" for d, n in counts.items() if n]
    return f"{plural(len(decisions), 'action')} proposed: " + ", ".join(parts) + "."


def render_gate1(rec: StepRecord, *, explain: bool = True) -> None:
    st.markdown("**Gate-1: every proposed action, checked before it runs**")
    if explain:
        st.caption(WHAT["gate1"])
    if not rec.gate1:
        why = " (this step answered the game's numbered menu)" if rec.menu else ""
        st.caption(f"Nothing was proposed to Gate-1 at this step{why}.")
        return
    st.caption(gate1_summary(rec.gate1))
    st.markdown("\n\n".join(gate1_line(g) for g in rec.gate1), unsafe_allow_html=True)
    if explain:
        st.caption(" · ".join(f"**{d}**: {w}" for d, w in DECISION_WORDS.items()))


# ----------------------------------------------------------------------------- the ambiguity menu

def render_menu(menu: MenuChoice, *, explain: bool = True) -> None:
    st.markdown("**Ambiguity menu: the game asked which one**")
    if explain:
        st.caption(WHAT["menu"])
    lines = [f"The action {code(menu.request)} was ambiguous; the game offered:"]
    for i, option in enumerate(menu.options):
        mark = f" ← {chip('chosen', GATE1_COLORS['ACCEPT'])}" if i == menu.chosen else ""
        lines.append(f"- **{i}**: {esc(option)}{mark}")
    chooser = CHOOSER_WORDS.get(menu.chooser, menu.chooser)
    answer = f"**{menu.chosen}**" if menu.chosen >= 0 else "with a blank (the menu was **cancelled**)"
    lines.append(f"\nAnswered {answer} by {esc(chooser)}" + (f": {esc(menu.why)}" if menu.why else "."))
    st.markdown("\n".join(lines), unsafe_allow_html=True)


# ----------------------------------------------------------------------------- the stagnation report

def render_stagnation(rep: StagnationReport, *, explain: bool = True) -> None:
    st.markdown(f"**Stagnation report** {chip('stagnating', STAGNATION_COLOR)}", unsafe_allow_html=True)
    if explain:
        st.caption(WHAT["stagnation"])
    st.markdown("The detector fired after this step:\n" + "\n".join(f"- {line}" for line in stagnation_lines(rep)),
                unsafe_allow_html=True)
    last = f"; the last action was {code(rep.last_action)}" if rep.last_action else ""
    st.markdown(f"Looked back over the last {plural(rep.window, 'step')}{last}.", unsafe_allow_html=True)
    if rep.observation_signature:
        st.caption("The observation that keeps coming back:")
        st.text(rep.observation_signature)
    if rep.actions_to_avoid:
        st.markdown("**Actions to avoid:** " + ", ".join(code(a) for a in rep.actions_to_avoid),
                    unsafe_allow_html=True)
    if rep.constraints:
        st.markdown("**Constraints for what comes next:**\n" + "\n".join(f"- {esc(c)}" for c in rep.constraints),
                    unsafe_allow_html=True)


# ----------------------------------------------------------------------------- the Critic

def critic_action_lines(c: CriticCall, decisions: list[Gate1Decision]) -> list[str]:
    """Each action the Critic wrote and what became of it: admitted as is, repaired, or dropped by Gate-1."""
    by_text = {g.proposed: g for g in decisions if g.source == "critic"}
    lines = []
    for a in c.actions:
        g = by_text.get(a)
        if g is not None and g.decision == "DROP":
            lines.append(f"{code(a)} {chip('DROP', GATE1_COLORS['DROP'])} {esc(g.detail or g.reason)}")
        elif g is not None and g.result and g.result != a:
            lines.append(f"{code(a)} {chip(g.decision, GATE1_COLORS.get(g.decision, '#7f7f7f'))} → {code(g.result)}")
        elif g is not None and g.decision == "ACCEPT":
            lines.append(f"{code(a)} ✓ admitted")
        elif _key(a) in {_key(x) for x in c.admitted}:  # later actions: Gate-1 checks them in full at their turn
            lines.append(f"{code(a)} ✓ admitted (Gate-1 checks it in full when its turn comes)")
        else:
            lines.append(f"{code(a)} ✗ not admitted")
    return lines


def render_critic_raw(c: CriticCall) -> None:
    """The exact prompt and the raw answer (kept out of the main view)."""
    st.caption("Prompt (exactly as sent)")
    st.code(c.prompt or "(no prompt: the Critic was not called)", language=None, wrap_lines=True, height=220)
    st.caption("Raw output")
    st.code(c.output or "(no output)", language=None, wrap_lines=True)


def render_critic(c: CriticCall, decisions: list[Gate1Decision], *, explain: bool = True,
                  show_raw: bool = True) -> None:
    """The Critic at this step. show_raw=False inside the step list (an expander cannot hold another)."""
    words, color = CRITIC_STATUS.get(c.status, (c.status, "#7f7f7f"))
    st.markdown(f"**Critic**: {chip(words, color)}", unsafe_allow_html=True)  # one phrase, not status + words
    if explain:
        st.caption(WHAT["critic"])
    st.markdown(f"Asked for by the stagnation report of step {esc(c.report_step)}." +
                (f" {esc(c.reason)}" if c.reason else ""), unsafe_allow_html=True)
    if c.error:
        st.error(f"The Critic's call failed: {md_text(c.error)}")
    if c.diagnosis:
        st.markdown(f"**DIAGNOSIS** (what is going wrong): {esc(c.diagnosis)}", unsafe_allow_html=True)
    if c.course_correction:
        st.markdown(f"**COURSE_CORRECTION** (what to do instead): {esc(c.course_correction)}",
                    unsafe_allow_html=True)
    if c.actions:
        policy = POLICY_WORDS.get(c.buffer_policy, c.buffer_policy)
        head = (f"**Actions:** {len(c.actions)} proposed, {len(c.admitted)} passed Gate-1 and entered the buffer"
                + (f" ({esc(policy)})" if policy and c.admitted else "") + ":")
        st.markdown(head + "\n" + "\n".join(f"- {line}" for line in critic_action_lines(c, decisions)),
                    unsafe_allow_html=True)
    elif c.status == "called":
        st.markdown("**Actions:** none could be read from its answer.")
    info = [f"Budget: {critic_budget_text(c.budget_used, c.budget)}"]
    if c.latency_s:
        info.append(f"{c.latency_s:.1f} s")
    st.caption(" · ".join(info))
    if c.problems:
        st.caption("Problems reading its answer: " + "; ".join(md_text(p) for p in c.problems))
    if show_raw and (c.prompt or c.output):
        with st.expander("The Critic's exact prompt and raw output"):
            render_critic_raw(c)


# ----------------------------------------------------------------------------- the section on the page

def not_running_line(header: EpisodeHeader) -> str | None:
    """One line naming the SRM mechanisms that did not run in this episode (None when all ran)."""
    off = [name for m, name in SRM_MECHANISMS.items() if m not in episode_mechanisms(header)]
    if not off:
        return None
    names = ", ".join(off[:-1]) + (" and " if len(off) > 1 else "") + off[-1]
    preset = header.config.get("preset", "?") if isinstance(header.config, dict) else "?"
    verb = "is" if len(off) == 1 else "are"
    return (f"Self-reflection: {names[0].upper() + names[1:]} {verb} not running in this preset (*{md_text(preset)}*); "
            f"the +SRM and Full presets turn {'it' if len(off) == 1 else 'them'} on.")


def render_srm(header: EpisodeHeader, records: list[StepRecord], t: int) -> None:
    """Gate-1, the menu, the stagnation report and the Critic at step t, for the mechanisms that ran."""
    on = srm_on(header)
    off_line = not_running_line(header)
    rec = record_at(records, t)
    if not on:
        st.caption(off_line or "")
        if rec is not None and rec.menu:  # the game's menu happens with or without self-reflection
            with st.container(border=True):
                render_menu(rec.menu)
        return
    st.markdown("**Self-reflection (SRM) at this step**")
    st.caption(WHAT["srm"])
    if rec is None:
        st.caption("Nothing checked yet: Gate-1, the stagnation detector and the Critic act from step 1 on.")
    else:
        left, right = st.columns(2)
        with left:
            if "gate1" in on:
                with st.container(border=True):
                    render_gate1(rec)
            if rec.menu:
                with st.container(border=True):
                    render_menu(rec.menu)
        with right:
            _render_stagnation_and_critic(header, records, t, rec, on)
    if off_line:
        st.caption(off_line)
    rules = srm_rules(header.config)
    if rules:
        with st.expander("The self-reflection rules and their numbers"):
            st.markdown("\n".join(f"- {r}" for r in rules))


def _render_stagnation_and_critic(header: EpisodeHeader, records: list[StepRecord], t: int, rec: StepRecord,
                                  on: list[str]) -> None:
    if "stagnation" in on:
        with st.container(border=True):
            if rec.stagnation:
                render_stagnation(rec.stagnation)
            else:
                st.markdown("**Stagnation report**")
                st.caption("The stagnation detector saw no sign of going round in circles after this step.")
    if "critic" in on:
        with st.container(border=True):
            if rec.critic:
                render_critic(rec.critic, rec.gate1)
            else:
                st.markdown("**Critic**")
                st.caption(f"Not called at this step. So far: {budget_so_far(header, records, t)}.")


def render_srm_detail(header: EpisodeHeader, rec: StepRecord) -> None:
    """The same cards, compact, inside one step of the step list (no "what is this" repeats, no expanders)."""
    on = srm_on(header)
    if "gate1" in on:
        render_gate1(rec, explain=False)
    if rec.menu:
        render_menu(rec.menu, explain=False)
    if rec.stagnation:
        render_stagnation(rec.stagnation, explain=False)
    if rec.critic:
        render_critic(rec.critic, rec.gate1, explain=False, show_raw=False)
