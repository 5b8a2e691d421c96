#!/usr/bin/env bash
# GPU speed (issue 48), in one device call of at most 8 minutes (machine start excluded), on the 1.7B shape:
#   1. the trainer beside a plain PyTorch loop on the same batch, 4 x (1,024 + 256) tokens: MFU, tokens/s, and
#      whether packed rows took the variable-length flash kernel; then with lengths spread 0.5x..1.5x;
#   2. the engine's decode at 1, 16 and 64 rows (CUDA graphs, eager) against Hugging Face generate, same run;
#   3. 16 requests sharing an 11,000-token cached prefix (an OpenClaw prompt): decode tokens/s;
#   4. the engine-vs-trainer log-prob gap on the same served tokens (bf16): engine_handoff_check.py --checks gap.
# Each part is time-boxed; JSON figures in $OUT (prefix.json, gap.json) beside the log.
#
#   OUT=/tmp/out bash benchmarks/gpu_speed_check.sh       (PARTS="train engine prefix gap"; PEAK_TFLOPS, default 989)
source "$(dirname "$0")/gpu_steps.sh"
PARTS="${PARTS:-train engine prefix gap}"
PEAK="${PEAK_TFLOPS:-989}"
ROUNDS="${ROUNDS:-5}"
preflight
m17=$(model qwen3-1.7b)
if [ "$ON_GPU" = 1 ]; then
  batch=(--device cuda --samples 4 --prompt 1024 --response 256 --peak-tflops "$PEAK")
  rows=1,16,64 prefix=11000
else
  batch=(--samples 4 --prompt 64 --response 16) rows=1,4 prefix=512
fi
if [[ " $PARTS " == *" train "* ]]; then
  step 150 "trainer vs plain loop, equal lengths" "$PY" benchmarks/train_step.py --model "$m17" "${batch[@]}" --rounds "$ROUNDS"
  step 120 "trainer vs plain loop, lengths 0.5x..1.5x" "$PY" benchmarks/train_step.py --model "$m17" "${batch[@]}" \
    --rounds "$ROUNDS" --vary 0.5
fi
if [[ " $PARTS " == *" engine "* ]]; then
  step 150 "engine decode vs Hugging Face generate, rows $rows" "$PY" benchmarks/engine_decode.py --model "$m17" \
    --batches "$rows" --tokens 64 --repeats 1
fi
if [[ " $PARTS " == *" prefix "* ]]; then
  step 150 "16 requests sharing a $prefix-token prefix" "$PY" benchmarks/engine_throughput.py --model "$m17" \
    --levels 1,16 --rounds 1 --tokens 64 --long-prefix "$prefix" --json "$OUT/prefix.json" \
    --engine-log "$OUT/prefix-engine.log"
fi
if [[ " $PARTS " == *" gap "* ]]; then
  step 120 "log-prob gap, engine vs trainer" "$PY" benchmarks/engine_handoff_check.py --model "$m17" --checks gap \
    --rows 16 --tokens 64 --json "$OUT/gap.json"
fi
cat "$OUT/steps.tsv"
