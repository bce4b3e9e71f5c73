#!/usr/bin/env bash
# Every GPU check of the project in one go: GPU tests, benchmarks, GPU reproducers.
# Usage: benchmarks/run_gpu.sh OUT_DIR [core|repro|all]   (needs CUDA; writes logs to OUT_DIR)
set -u
out=${1:?give an output directory}
part=${2:-all}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{ nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"; date -u; } > "$out/env.txt" 2>&1
if [ "$part" = core ] || [ "$part" = all ]; then
  timeout 200 python3 benchmarks/digest_bandwidth.py > "$out/digest_bandwidth.txt" 2>&1
  timeout 240 python3 benchmarks/trace_overhead.py > "$out/trace_overhead.txt" 2>&1
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_digest_gpu.py tests/test_capture_gpu.py \
    tests/test_replay.py tests/test_gpu_demo.py tests/test_sentinel_gpu.py > "$out/gpu_tests_core.txt" 2>&1
fi
if [ "$part" = repro ] || [ "$part" = all ]; then
  timeout 280 python3 -m pytest -q -p no:cacheprovider tests/test_repro_gpu.py > "$out/gpu_tests_repro.txt" 2>&1
  timeout 280 python3 -m reproducers.gpu_suite --out "$out/gpu_suite.md" > "$out/gpu_suite.log" 2>&1
fi
cp benchmarks/RESULTS.md "$out/RESULTS.md" 2>/dev/null || true
exit 0
