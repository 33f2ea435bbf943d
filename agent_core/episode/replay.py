"""The rules for continuing a recorded episode: which traces can be resumed, and what a fork inherits."""
from __future__ import annotations

from collections import deque
from typing import Any, Iterator

from ..observation import same_lines_reordered
from ..trace import Episode, StepRecord
from .state import AgentState


class ReplayError(RuntimeError):
    """A recorded episode cannot be continued (fork, resume): the step is out of range, the episode is over, or
    the replay diverged from the record (an observation, a score, or the rebuilt state)."""


def first_difference(now: str, recorded: str) -> str:
    """Where a room text replayed now first differs from the recorded one, for a divergence message."""
    a, b = now.strip().splitlines(), recorded.strip().splitlines()
    if same_lines_reordered(now, recorded):
        return ("the same objects, listed in another order however often the task was loaded again: ScienceWorld "
                "now and then lists objects that share a name in another order, and this episode was recorded in such "
                "a rare order, so it cannot be replayed exactly")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}: now {x.strip()!r}, recorded {y.strip()!r}"
    return f"now {len(a)} lines, recorded {len(b)}"


def resume_problem(ep: Episode) -> str | None:
    """Why this trace cannot be resumed, or None when it can (no summary, or one that says stopped or error, and a
    last step that did not end the episode)."""
    if ep.summary is not None and ep.summary.reason not in ("stopped", "error"):
        return f"{ep.path} already ended ({ep.summary.reason}, {ep.summary.final_score:g} points): nothing to resume"
    if ep.steps and ep.steps[-1].done:
        return f"{ep.path} ended at step {ep.steps[-1].step} ({ep.steps[-1].score:g} points): nothing to resume"
    return None


def resumable(ep: Episode) -> bool:
    return resume_problem(ep) is None


def same_settings(a: dict, b: dict) -> bool:
    """Two config records that make the same agent, whichever LLM serves it and wherever its memory store lives (a
    fork under the parent's preset from a session with another LLM server still inherits the parent's state)."""
    def strip(d: dict) -> dict:
        out = {k: v for k, v in (d or {}).items() if k != "llm"}
        for part, key in (("amm", "store_dir"), ("memory", "persist_dir")):
            if isinstance(out.get(part), dict):
                out[part] = {k: v for k, v in out[part].items() if k != key}
        return out
    return strip(a) == strip(b)


def fork_state(state: AgentState, same_settings: bool) -> AgentState:
    """What a fork keeps of its parent's state after the replayed steps. Under the parent's own settings, all of
    it, so the fork continues as the parent did. Under other settings (another preset), the history, score and
    plan, while the control state starts afresh: Swift acts, the buffer is empty, no report is pending and the
    Critic has its whole budget (the parent's mechanisms may not exist in the fork)."""
    if same_settings:
        return state.draft()
    out = state.draft()
    out.mode, out.buffer, out.buffer_failures = "swift", deque(), 0
    out.pending_report, out.avoid, out.avoid_until = None, [], 0
    out.critic_calls, out.last_critic_step, out.critic_backoff_until = 0, None, 0
    out.menu_tried = {}
    return out


def provenance_changes(header_code: dict[str, Any], header_hash: str, code: dict[str, Any],
                       config_hash: str, header_machine: dict[str, Any] | None = None,
                       machine: dict[str, Any] | None = None) -> list[str]:
    """How the code, settings and kind of machine now differ from those that recorded a trace ([] when the same, or
    unknown). Another kind of machine may round Swift's and the LLM's numbers differently, so a resume there cannot
    promise the same actions."""
    from ..provenance import describe_machine, same_machine_kind

    out = []
    if header_machine and machine and not same_machine_kind(header_machine, machine):
        out.append(f"machine: recorded on {describe_machine(header_machine)}, now {describe_machine(machine)}")
    if header_code.get("commit") and code.get("commit") and header_code["commit"] != code["commit"]:
        out.append(f"code: recorded at {header_code['commit'][:10]}, now {code['commit'][:10]}")
    elif header_code.get("diff", "") != code.get("diff", "") and header_code and code:
        out.append("code: other uncommitted changes than when recorded")
    if header_hash and config_hash and header_hash != config_hash:
        out.append(f"config: recorded {header_hash[:12]}, now {config_hash[:12]}")
    return out


def states_along(ep: Episode) -> Iterator[tuple[StepRecord, AgentState]]:
    """Each step record with the agent's state just before it, rebuilt from the records by the one transition
    (`apply`) under the settings the episode was played with: what a rule saw when it fired (benchmarks read it)."""
    from ..config import Config
    from .reducer import apply
    from .state import initial_state

    cfg = Config.from_dict(ep.header.config)
    st = initial_state(ep.header.task, "", 0, "", "", "")
    for rec in ep.steps:
        yield rec, st
        st = apply(st, rec, cfg)
