"""What the Run page says while a step is in flight: who is thinking, for how long, and how long such a
call usually takes on this machine (the median of this episode's finished calls of the same kind, read
from the step records). Pure functions, so they are tested without a browser."""
from __future__ import annotations

import statistics
import time
from typing import Any


def call_purpose(prompt: str) -> str:
    """Which call this is, from the prompt files' own words (agent_core/sage/prompts, srm/prompts)."""
    head = prompt[:300]
    if "You are the Critic" in head:
        return "critic"
    if "careful reviewer" in head:
        return "focus_review"
    if "Answer the five questions" in prompt:
        return "plan"
    return "ground"


CALL_LABELS = {"critic": "the Critic is diagnosing the stagnation", "plan": "Sage is planning (Q1-Q5)",
               "ground": "Sage is choosing its next command",
               "focus_review": "Sage is checking which object to focus on"}


def call_label(prompt: str) -> str:
    return CALL_LABELS[call_purpose(prompt)]


def usual_seconds(records, purpose: str) -> tuple[float | None, int]:
    """Median latency of the last (up to 10) finished calls of this kind in this episode: the page's estimate."""
    lat = [c.latency_s for r in records for c in r.llm_calls if c.purpose == purpose and c.latency_s and not c.error]
    lat = lat[-10:]
    return (statistics.median(lat), len(lat)) if lat else (None, 0)


def progress_label(job: dict[str, Any], records) -> str:
    """What the step in flight is doing, for how long, and how long such a call usually takes here."""
    now = time.perf_counter()
    text = f"Step {job['step']}: {job['label']}, {now - job['since']:.0f} s"
    if job["purpose"]:
        est, n = usual_seconds(records, job["purpose"])
        text += (f" (LLM call {job['call']} of this step; usually ~{est:.0f} s here, the median of the last {n})"
                 if est is not None else f" (LLM call {job['call']} of this step; the first of its kind, so no "
                                         f"estimate yet: the embedded model takes 10-40 s on a laptop CPU)")
    return text + f"; the step so far {now - job['started']:.0f} s"
