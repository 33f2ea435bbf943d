#!/usr/bin/env bash
# Record the example episodes shipped under assets/episodes/ (Swift + Sage on the embedded default LLM),
# so a teacher can demo recorded runs without waiting for a model. Takes a while on a CPU.
#   bash scripts/record_examples.sh [STEP_LIMIT]     (THREADS=1 when the other core is busy)
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${1:-30}  # the shipped examples used 30
mkdir -p assets/episodes
for spec in "lifespan-longest-lived 0" "find-non-living-thing 0" "chemistry-mix-paint-secondary-color 0"; do
  set -- $spec
  var=$(.venv/bin/python -c "from agent_core.env import catalog; print(catalog().get('$1').test[$2])")
  .venv/bin/python -m agent_core.run --task "$1" --variation "$var" --split test --llm embedded \
      --max-steps "$LIMIT" --runs-dir assets/episodes --set llm.n_threads="${THREADS:-2}"
done
ls -la assets/episodes
