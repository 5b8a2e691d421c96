#!/usr/bin/env bash
# One-shot GPU figures for the trainer (issue 30), bounded to about 6 minutes on one H100:
#   1. random models of Qwen3-1.7B's and 4B's shapes, built once on the GPU (no download);
#   2. 1.7B, 4 samples of 1,024 + 256 tokens: packed vs padded log-probs on the device (--check), then the trainer
#      beside the plain PyTorch loop on the same batch, then a profile of one trainer step;
#   3. the same with lengths spread 0.5x..1.5x (the plain loop pads, the trainer packs);
#   4. 4B, 4 samples of 1,024 + 256 tokens: with activation checkpointing, then without;
#   5. 1.7B on the megatron backend, the same batch.
# Every step runs under `timeout` and prints its own figures; a failing step does not stop the next.
#
#   bash benchmarks/gpu_trainer_check.sh            (PYTHON=... to pick the interpreter; MODELS=dir for the models)
#   FLAGS="--compile off" QUICK=1 bash benchmarks/gpu_trainer_check.sh    (the torch backend without compiling;
#                                                                     QUICK: stop after the 4B run with checkpointing)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
MODELS="${MODELS:-/tmp/ocrl-models}"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
quiet() { grep -v -e "Warning" -e "warnings.warn" -e "it/s\]" -e "^USDT" >&2; }
step() {  # step SECONDS LABEL COMMAND...
  local limit=$1 label=$2 started rc
  shift 2
  echo "== $label"
  started=$(date +%s)
  timeout "$limit" "$@" 2> >(quiet)
  rc=$?
  echo "== $label: exit $rc in $(( $(date +%s) - started )) s$( [ $rc -eq 124 ] && echo ' (TIMED OUT)')"
}

"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, \
torch.cuda.get_device_name() if torch.cuda.is_available() else 'NO CUDA')"
for shape in qwen3-1.7b qwen3-4b; do
  [ -f "$MODELS/$shape/config.json" ] || step 120 "build $shape" "$PY" benchmarks/qwen3_shapes.py --shape "$shape" --out "$MODELS/$shape"
done
base=(--device cuda --samples 4 --prompt 1024 --response 256)
common=("${base[@]}" ${FLAGS:-})
step 180 "1.7B: trainer vs plain loop, same batch" \
  "$PY" benchmarks/train_step.py --model "$MODELS/qwen3-1.7b" "${common[@]}" --rounds 5 --check --profile 25
step 120 "1.7B: lengths 0.5x..1.5x, trainer packs, plain loop pads" \
  "$PY" benchmarks/train_step.py --model "$MODELS/qwen3-1.7b" "${common[@]}" --rounds 5 --vary 0.5
step 150 "4B: 4 x 1,280 tokens, activation checkpointing" \
  "$PY" benchmarks/train_step.py --model "$MODELS/qwen3-4b" "${common[@]}" --rounds 2 --no-plain --checkpointing
[ -n "${QUICK:-}" ] && exit 0
step 90 "4B: 4 x 1,280 tokens, no activation checkpointing" \
  "$PY" benchmarks/train_step.py --model "$MODELS/qwen3-4b" "${common[@]}" --rounds 2 --no-plain
step 90 "1.7B, megatron backend (SDPA core attention): 4 x 1,280 tokens" \
  "$PY" benchmarks/train_step.py --model "$MODELS/qwen3-1.7b" "${base[@]}" --rounds 3 --no-plain --backend megatron
