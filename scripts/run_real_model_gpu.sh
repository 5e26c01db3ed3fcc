#!/usr/bin/env bash
# Real GRPO runs of a small Hub model on GSM8K on a GPU machine, through `bayes-grpo train`
# launched with TRL's own distributed engine (accelerate). Writes one run directory per
# (G, seed) under $OUT, each ingestible with `bayes-grpo ingest $OUT`.
#
# Needs: the package installed with the `train` extra, one or more CUDA GPUs, and either network
# access to the Hugging Face Hub or a local copy of the model and the dataset (pass paths in
# MODEL / DATASET; set HF_HUB_OFFLINE=1 to forbid downloads). The Python used is $PYTHON, else the
# repository's .venv/bin/python (what `make` installs into), else `python` on PATH.
#
# Usage (every setting is an environment variable with a default):
#   scripts/run_real_model_gpu.sh                               # Qwen2.5-0.5B-Instruct, G in 4 8, seed 0
#   MODEL=/models/qwen0.5b DATASET=/data/gsm8k.jsonl G_LIST="4 8 16" SEEDS="0 1 2" \
#       STEPS=200 NUM_GPUS=4 OUT=runs/qwen scripts/run_real_model_gpu.sh
#   DRY_RUN=1 scripts/run_real_model_gpu.sh                     # print the TRL settings only
#
# Group-size comparisons are run at a fixed number of completions per step (COMPLETIONS),
# so prompts per step = COMPLETIONS / G (see data/README.md for why this matters).
set -euo pipefail

MODEL=${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}
DATASET=${DATASET:-openai/gsm8k}
# a Hub dataset's configuration: "main" for openai/gsm8k (it has "main" and "socratic"), none for
# any other DATASET unless set; a dataset file or a save_to_disk folder has none (an error there)
if [[ -z "${DATASET_CONFIG+set}" ]]; then
  if [[ "$DATASET" == openai/gsm8k ]]; then DATASET_CONFIG=main; else DATASET_CONFIG=""; fi
fi
G_LIST=${G_LIST:-"4 8"}
SEEDS=${SEEDS:-"0"}
COMPLETIONS=${COMPLETIONS:-64}         # completions per optimizer step, all GPUs together
LR=${LR:-1e-6}
MOMENTUM=${MOMENTUM:-0.9}              # Adam beta1 (EMA convention)
K_REF=${K_REF:-1}
BETA=${BETA:-0.0}
STEPS=${STEPS:-200}
MAX_LEN=${MAX_LEN:-256}                # tokens per completion
OUT=${OUT:-runs/real_gpu}
DRY_RUN=${DRY_RUN:-0}
if [[ -z "${PYTHON:-}" ]]; then
  REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if [[ -x "$REPO/.venv/bin/python" ]]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python; fi
fi
if [[ -z "${NUM_GPUS:-}" ]]; then
  NUM_GPUS=$(command -v nvidia-smi >/dev/null && nvidia-smi -L | wc -l || echo 0)
fi
if [[ "$NUM_GPUS" -lt 1 && "$DRY_RUN" != 1 ]]; then
  echo "run_real_model_gpu.sh: no GPU found (set NUM_GPUS, or DRY_RUN=1 to only print the settings)" >&2
  exit 2
fi
NUM_GPUS=$(( NUM_GPUS < 1 ? 1 : NUM_GPUS ))

if [[ "$DRY_RUN" == 1 ]]; then
  LAUNCH=("$PYTHON" -m bayes_grpo)
elif [[ "$NUM_GPUS" -gt 1 ]]; then
  LAUNCH=("$PYTHON" -m accelerate.commands.launch --multi_gpu --num_processes "$NUM_GPUS" --mixed_precision bf16 -m bayes_grpo)
else
  LAUNCH=("$PYTHON" -m accelerate.commands.launch --num_processes 1 --mixed_precision bf16 -m bayes_grpo)
fi

mkdir -p "$OUT"
for G in $G_LIST; do
  for SEED in $SEEDS; do
    RUN="$OUT/$(basename "$MODEL")_g${G}_c${COMPLETIONS}_lr${LR}_k${K_REF}_s${SEED}"
    # a completed run says so in its metadata (an interrupted one keeps its log so far too)
    if grep -Eqs '"completed": *true' "$RUN/bayes_grpo_run.json" && [[ "$DRY_RUN" != 1 ]]; then
      echo "$RUN: exists, skipped"; continue
    fi
    EXTRA=()
    [[ "$DRY_RUN" == 1 ]] && EXTRA+=(--dry-run)
    [[ -n "$DATASET_CONFIG" ]] && EXTRA+=(--dataset-config "$DATASET_CONFIG")
    # an interrupted run (its log so far, checkpoints, bayes_grpo_run.json "completed": false): again
    [[ -f "$RUN/bayes_grpo_run.json" && "$DRY_RUN" != 1 ]] && EXTRA+=(--overwrite)
    start=$(date +%s)
    "${LAUNCH[@]}" train "$RUN" \
      --model "$MODEL" --task gsm8k --dataset "$DATASET" \
      --device auto --num-processes "$NUM_GPUS" \
      --group-size "$G" --completions-per-step "$COMPLETIONS" \
      --learning-rate "$LR" --momentum "$MOMENTUM" --k-ref "$K_REF" --beta "$BETA" \
      --seed "$SEED" --steps "$STEPS" --max-completion-length "$MAX_LEN" \
      "${EXTRA[@]}"
    echo "$RUN: $(( $(date +%s) - start )) s"
  done
done
[[ "$DRY_RUN" == 1 ]] || echo "ingest with: bayes-grpo ingest $OUT"
