"""Batch evaluation (docs/AGENT.md §8): presets x tasks x test variations on local worker processes or a
Ray cluster, the paper's metrics from the traces, and its tables. CLI: `python -m agent_core.evaluate`."""
from .metrics import aggregate, comparable, episode_metrics
from .report import build_results, load_results, markdown, write_reports
from .spec import DEFAULT_PRESETS, EvalError, EvalSpec, Job, prepare_dir, trace_path

__all__ = ["DEFAULT_PRESETS", "EvalError", "EvalSpec", "Job", "aggregate", "build_results", "comparable",
           "episode_metrics", "load_results", "markdown", "prepare_dir", "trace_path", "write_reports"]
