#!/usr/bin/env bash
# The whole GPU part of the megatron-vs-deepspeed case, from a bare machine with torch and
# CUDA: install the carried py3.12 wheels (megatron-core 0.19.2, DeepSpeed, this project's
# dependencies) into /tmp/site, run A and B with their boundary captures, compare, and let
# the alignment loop prove each differing boundary's policy by rerunning B (told nothing);
# then rerun B with each intervention given as an argument and compare again; then the
# clipping cell (triage_clip.toml) through the same loop. Lines starting "GPU CHECK" say
# whether what must hold held; the exit status is 1 when one did not.
#   bash tests/cases/megatron-vs-deepspeed/gpu_run.sh OUTDIR ['INTERVENTION' ...]
set -u
OUTDIR=${1:?usage: gpu_run.sh OUTDIR [INTERVENTION ...]}; shift
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
CASE=$ROOT/tests/cases/megatron-vs-deepspeed
mkdir -p "$OUTDIR"
python3 -c "import numpy" 2>/dev/null && rm -f "$ROOT"/.whl312/numpy*
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$ROOT"/.whl312/*.whl 2>&1 | grep -v WARNING | tail -3
export PYTHONPATH=/tmp/site:$ROOT:$CASE PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
export TORCH_CUDA_ARCH_LIST=9.0
printf '#!/usr/bin/env python3\nfrom triage_agent.cli.app import main\nmain()\n' > /tmp/site/bin/triage
chmod +x /tmp/site/bin/triage
nvidia-smi -L
python3 -c "import torch, deepspeed, megatron.core as m; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'deepspeed', deepspeed.__version__, 'megatron-core', m.__version__)"
date -u
cd "$CASE" || exit 2
WS=$OUTDIR/ws
rm -rf "$WS"
FAILED=0
check() {  # check NAME CONDITION-STATUS
  if [ "$2" = 0 ]; then echo "GPU CHECK $1: PASS"; else echo "GPU CHECK $1: FAIL"; FAILED=1; fi
}
t0=$(date +%s)
triage correspond case --workspace "$WS" --out "$OUTDIR/t0" --format md 2>&1 | tee "$OUTDIR/t0.txt"
rc=${PIPESTATUS[0]}
echo "align seconds: $(( $(date +%s) - t0 )), exit $rc"
# differs as launched (exit 1), every difference proven: no boundary left differing
all_proven() {  # all_proven TABLE.JSON: differs as launched, every boundary matches aligned
  python3 - "$1" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ok = t["kept"] and t["aligned"]["first"] is None and all(r["aligned"] == "match" for r in t["rows"])
print("kept:", t["kept"], "| stopped:", t["stopped"])
sys.exit(0 if ok else 1)
PY
}
all_proven "$OUTDIR/t0/table.json"; check "align: every boundary matches with the proven interventions, none unproven" $?
[ "$rc" = 1 ]; check "align: exit 1 (differs as launched, every difference proven)" $?
i=1
for iv in "$@"; do
  t0=$(date +%s)
  triage correspond case --no-align --workspace "$WS" --out "$OUTDIR/t$i" -i "$iv" 2>&1 | tee "$OUTDIR/t$i.txt"
  echo "rerun $i ($iv) seconds: $(( $(date +%s) - t0 ))"
  i=$((i + 1))
done
# A second cell: both clip the gradient norm at 1.0 (triage_clip.toml), through the same loop
t0=$(date +%s)
triage correspond case --case triage_clip.toml --workspace "$WS/clip" --out "$OUTDIR/tclip" \
  --format md --max-reruns 2 2>&1 | tee "$OUTDIR/tclip.txt"
rc=${PIPESTATUS[0]}
echo "clipping cell seconds: $(( $(date +%s) - t0 )), exit $rc"
grep -q "unscale_and_clip_grads" "$OUTDIR/tclip/table.json"; check "clip: the clip replacement was tried" $?
all_proven "$OUTDIR/tclip/table.json"; check "clip: every boundary matches with the proven interventions" $?
# B without its capture: the dumps must not move B's metric bits
python3 train_deepspeed.py --out "$OUTDIR/b-plain" --deepspeed_config zero2.json --port 29533 > "$OUTDIR/b-plain.log" 2>&1
echo "capture perturbation check (B with dumps vs B without):"
triage metrics diff "$(ls -d "$WS"/runs/b/baseline-* | head -1)" "$OUTDIR/b-plain" 2>&1 | tail -3
echo "GPU CHECK summary: $([ $FAILED = 0 ] && echo PASS || echo FAIL)"
if [ -n "${GPU_TESTS:-}" ]; then
  cd "$ROOT" && TRIAGE_CORRESPOND_WS=$WS timeout 400 python3 -m pytest -q -p no:cacheprovider -m gpu -rA \
    tests/test_megatron_gpu.py "tests/test_corpus.py::test_gpu_case_ground_truth[megatron-vs-deepspeed]" --timeout 380 2>&1 | tail -15
fi
exit $FAILED
