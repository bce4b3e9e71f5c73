#!/usr/bin/env bash
# The GPU corpus cases (tests/cases/gpu-*) through `triage run`, scored by
# benchmarks/accuracy.py, on a CUDA machine whose Python has torch but none of the project's
# dependencies: the wheels in $WHEELS are installed into $SITE first (nothing else is
# touched; a numpy the interpreter already has is kept). A case that needs more CUDA devices
# than the machine has is left out and said so. Run from the repository root:
#
#   OUT=/tmp/acc bash benchmarks/accuracy_gpu.sh                 # every GPU case
#   CASES=gpu-atomics-index-add,gpu-cublas-workspace bash benchmarks/accuracy_gpu.sh
#
# BUDGET (triage run --budget-minutes, default 4) and CASE_TIMEOUT (seconds per case,
# default 240) bound each case; the table and the accuracy line go to $OUT/accuracy_gpu.txt,
# the rows to $OUT/accuracy_gpu.json, each case's ledger beside them.
set -u
WHEELS=${WHEELS:-.whl312}
SITE=${SITE:-/tmp/site}
OUT=${OUT:-/tmp/accuracy-gpu}
mkdir -p "$OUT" "$SITE/bin"
wheels=$(ls "$WHEELS"/*.whl)
if python3 -c "import numpy" 2>/dev/null; then wheels=$(echo "$wheels" | grep -v '/numpy-'); fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" $wheels 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1 PATH="$SITE/bin:$PATH" TORCH_CUDA_ARCH_LIST=9.0
printf '#!/usr/bin/env python3\nfrom triage_agent.cli.app import main\nmain()\n' > "$SITE/bin/triage"
chmod +x "$SITE/bin/triage"
nvidia-smi -L
python3 benchmarks/accuracy.py --gpu-only ${CASES:+--cases "$CASES"} \
  --budget-minutes "${BUDGET:-4}" --timeout-s "${CASE_TIMEOUT:-240}" \
  --json-out "$OUT/accuracy_gpu.json" --keep > "$OUT/accuracy_gpu.txt" 2>&1
status=$?
for d in /tmp/accuracy-gpu-*; do
  [ -f "$d/ws/ledger.jsonl" ] && cp "$d/ws/ledger.jsonl" "$OUT/$(basename "$d").ledger.jsonl"
done
tail -45 "$OUT/accuracy_gpu.txt"
git rev-parse --short HEAD 2>/dev/null
exit $status
