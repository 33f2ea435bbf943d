"""Comparing two runs exactly: their records without what differs from one run of the same decisions to the next."""
from __future__ import annotations

import dataclasses
from typing import Any



# fields that differ between two runs of the same decisions: clocks, latencies, the machine's thread count and
# whether other sessions' calls came between (the cache is given back as it was)
VOLATILE = frozenset({"timings", "latency_s", "elapsed_ms", "at_s", "cpu_threads", "started_at", "ended_at",
                      "created_wall", "cache_state"})


def canonical(record: Any) -> Any:
    """A record as plain data without its volatile fields (and without the environment's 'resumed' and 'reloaded'
    notes), so two runs that decided the same compare equal."""
    def strip(x: Any) -> Any:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            x = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
        if isinstance(x, dict):
            out = {k: strip(v) for k, v in x.items() if k not in VOLATILE}
            if "env_events" in out:
                out["env_events"] = [e for e in out["env_events"] if e.get("kind") not in ("resumed", "reloaded")]
            return out
        if isinstance(x, (list, tuple)):
            return [strip(v) for v in x]
        return x
    return strip(record)
