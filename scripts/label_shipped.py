"""Label the shipped traces (assets/) that were recorded before traces kept their code revision: for each, the
commit that added or last changed it, so the app can say which code recorded it at the latest.

    .venv/bin/python scripts/label_shipped.py        # rewrites assets/PROVENANCE.json
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_core.trace import read_episode  # noqa: E402


def main() -> int:
    out: dict[str, dict] = {}
    for path in sorted((ROOT / "assets").rglob("*.jsonl")):
        try:
            ep = read_episode(path, tolerant=True)
        except (OSError, ValueError):
            continue
        if ep.header.code:  # it records its own revision
            continue
        rel = str(path.relative_to(ROOT))
        line = subprocess.run(["git", "log", "-1", "--format=%H %cs", "--", rel], cwd=ROOT, capture_output=True,
                              text=True).stdout.split()
        if line:
            out[ep.header.run_id] = {"file": rel, "committed_in": line[0], "date": line[1]}
    (ROOT / "assets" / "PROVENANCE.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"labelled {len(out)} shipped traces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
