# Sourced by the one-call GPU checks (gpu_loop_check.sh, gpu_speed_check.sh): the interpreter, the random models,
# and `step`, which runs one part under its own time box so a failure or a hang cannot eat the parts after it.
# Every step's output goes to the log; its exit status and seconds to $OUT/steps.tsv.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
MODELS="${MODELS:-/tmp/ocrl-models}"
OUT="${OUT:-/tmp/ocrl-gpu-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
# CPU runs (the suite's): the tiny model stands in for every shape, so each step's code path still runs.
ON_GPU=$("$PY" -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)

quiet() { grep --line-buffered -v -e "Warning" -e "warnings.warn" -e "it/s\]" -e "^USDT" -e "Writing model shards" >&2; }

step() {  # step SECONDS LABEL COMMAND...
  local limit=$1 label=$2 started rc
  shift 2
  echo "== $label (at most ${limit}s)"
  started=$(date +%s)
  timeout -k 10 "$limit" "$@" 2> >(quiet)
  rc=$?
  local took=$(( $(date +%s) - started ))
  echo "== $label: exit $rc in ${took} s$( [ $rc -eq 124 ] && echo ' (TIMED OUT)')"
  printf '%s\t%s\t%s\n' "$label" "$rc" "$took" >> "$OUT/steps.tsv"
  return 0
}

model() {  # model SHAPE: the folder of a random model of SHAPE (built once), or the tiny model off a GPU
  local shape=$1
  if [ "$ON_GPU" != 1 ]; then
    "$PY" -c "from engine.tiny_qwen3 import ensure_tiny_model; from pathlib import Path; print(ensure_tiny_model(Path('$MODELS/tiny-qwen3')))" 2>/dev/null | tail -1
    return
  fi
  [ -f "$MODELS/$shape/config.json" ] || timeout 180 "$PY" benchmarks/qwen3_shapes.py --shape "$shape" --out "$MODELS/$shape" >&2
  echo "$MODELS/$shape"
}

preflight() {
  "$PY" - <<'PYEOF' || { echo "preflight FAILED"; exit 2; }
import sys, torch, transformers
print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", torch.cuda.get_device_name(), f"{p.total_memory / 2**30:.0f} GiB")
else:
    print("no CUDA device: the tiny model on the CPU stands in for every shape")
PYEOF
  date -u +"started %Y-%m-%dT%H:%M:%SZ"
}
