#!/usr/bin/env bash
# The whole GPU part of the megatron-vs-deepspeed case, from a bare machine with torch and
# CUDA: install the carried py3.12 wheels (megatron-core 0.19.2, DeepSpeed, this project's
# dependencies) into /tmp/site, run A and B with their boundary captures, compare, then
# rerun B with each intervention given as an argument and compare again.
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
t0=$(date +%s)
triage correspond case --workspace "$WS" --out "$OUTDIR/t0" 2>&1 | tee "$OUTDIR/t0.txt"
echo "baseline seconds: $(( $(date +%s) - t0 ))"
i=1
for iv in "$@"; do
  t0=$(date +%s)
  triage correspond case --workspace "$WS" --out "$OUTDIR/t$i" -i "$iv" 2>&1 | tee "$OUTDIR/t$i.txt"
  echo "rerun $i ($iv) seconds: $(( $(date +%s) - t0 ))"
  i=$((i + 1))
done
# A second cell, explored and not proven: both with gradient clipping at norm 1.0
python3 -c "import json; c=json.load(open('zero2.json')); c['gradient_clipping']=1.0; json.dump(c, open('/tmp/zero2_clip.json','w'))"
python3 train_megatron.py --out "$OUTDIR/clip-a" --clip-grad 1.0 --port 29531 --boundaries "$OUTDIR/clip-a/boundaries" > "$OUTDIR/clip-a.log" 2>&1
python3 train_deepspeed.py --out "$OUTDIR/clip-b" --deepspeed_config /tmp/zero2_clip.json --decay matrices --port 29532 --boundaries "$OUTDIR/clip-b/boundaries" > "$OUTDIR/clip-b.log" 2>&1
echo "cell: clip_grad 1.0 on both, B with --decay=matrices"
triage correspond compare "$OUTDIR/clip-a/boundaries" "$OUTDIR/clip-b/boundaries" --out "$OUTDIR/tclip" 2>&1 | tee "$OUTDIR/tclip.txt"
# B without its capture: the dumps must not move B's metric bits
python3 train_deepspeed.py --out "$OUTDIR/b-plain" --deepspeed_config zero2.json --port 29533 > "$OUTDIR/b-plain.log" 2>&1
echo "capture perturbation check (B with dumps vs B without):"
triage metrics diff "$(ls -d "$WS"/runs/b/baseline-* | head -1)" "$OUTDIR/b-plain" 2>&1 | tail -3
if [ -n "${GPU_TESTS:-}" ]; then
  cd "$ROOT" && TRIAGE_CORRESPOND_WS=$WS timeout 400 python3 -m pytest -q -p no:cacheprovider -m gpu -rA \
    tests/test_megatron_gpu.py "tests/test_corpus.py::test_gpu_case_ground_truth[megatron-vs-deepspeed]" --timeout 380 2>&1 | tail -15
fi
