#!/usr/bin/env bash
# Submit the stages as one chain of SLURM jobs: memory pretraining -> clue SFT [-> RLGF] -> evaluation,
# each job starting only once the one before it finished well (--dependency=afterok).
#
#   bash slurm/chain.sh                                      # Qwen2-7B: pretrain, SFT, paper-7b eval
#   bash slurm/chain.sh --out runs/qwen2-try2 --shards 8     # the eval as 8 shards, then a merge job
#   bash slurm/chain.sh --pretrain configs/pretrain/mistral-7b.yaml --sft configs/sft/mistral-7b.yaml \
#       --eval configs/eval/paper-7b.yaml --dry-run          # print the sbatch commands, submit nothing
#   bash slurm/chain.sh --rlgf configs/rlgf/qwen2-7b.yaml    # the third stage (RLGF) between SFT and eval
#
# The folders agree whatever the jobs are named: pretraining writes OUT/pretrain, SFT starts from
# OUT/pretrain/final and writes OUT/sft, the evaluation reads OUT/sft/final (as pipeline.memory_weights)
# and writes OUT/eval. With --rlgf, RLGF starts from OUT/sft/final and writes its pairs and checkpoints to
# OUT/rlgf, and the evaluation reads OUT/rlgf/final instead. OUT defaults to runs/chain-NAME, NAME the SFT
# config's file name. Each job keeps its script's requeue and resume (slurm/pretrain.sbatch, sft.sbatch,
# rlgf.sbatch, eval.sbatch).
#
# Options:
#   --pretrain CONFIG   stage 1 config   (default: configs/pretrain/qwen2-7b.yaml)
#   --sft CONFIG        stage 2 config   (default: configs/sft/qwen2-7b.yaml)
#   --rlgf CONFIG       stage 3 config   (default: none, no RLGF stage); its model.base must be SFT's
#   --eval CONFIG       evaluation config (default: configs/eval/paper-7b.yaml); its memory_model must be
#                       the base the memory was trained on
#   --out DIR           the chain's folder (default: runs/chain-NAME)
#   --shards N          run the evaluation as a job array of N shards and a merge job (default: 1, one job)
#   --dry-run           print the commands instead of submitting them
# Settings, from the environment: MEMORAG_HOME (the checkout; default: this script's parent folder),
# MEMORAG_SBATCH_OPTIONS (more sbatch options for every job, e.g. "--partition=gpu --account=proj"), and
# those the sbatch scripts read (MEMORAG_VENV, MEMORAG_ACCELERATE_CONFIG, ...), passed on to the jobs.
set -euo pipefail

PRETRAIN=configs/pretrain/qwen2-7b.yaml
SFT=configs/sft/qwen2-7b.yaml
EVAL=configs/eval/paper-7b.yaml
RLGF=""
OUT=""
SHARDS=1
DRY_RUN=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while (( $# > 0 )); do
  case "$1" in
    --pretrain) PRETRAIN=$2; shift 2 ;;
    --sft) SFT=$2; shift 2 ;;
    --rlgf) RLGF=$2; shift 2 ;;
    --eval) EVAL=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --shards) SHARDS=$2; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown argument $1 (see bash slurm/chain.sh --help)" >&2; exit 2 ;;
  esac
done
MEMORAG_HOME=${MEMORAG_HOME:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$MEMORAG_HOME"
for config in "$PRETRAIN" "$SFT" "$EVAL" ${RLGF:+"$RLGF"}; do
  if [[ ! -f "$config" ]]; then
    echo "error: no config file $config (paths are relative to $MEMORAG_HOME)" >&2
    exit 2
  fi
done
if ! [[ "$SHARDS" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: --shards $SHARDS: give a whole number of shards, at least 1" >&2
  exit 2
fi
NAME=$(basename "$SFT" .yaml)
OUT=${OUT:-runs/chain-$NAME}
case "$OUT" in /*) ;; *) OUT="$MEMORAG_HOME/$OUT" ;; esac
if [[ "$OUT" == *,* ]]; then  # sbatch --export separates its variables with commas
  echo "error: --out $OUT: the folder's path may not hold a comma" >&2
  exit 2
fi
read -r -a EXTRA <<< "${MEMORAG_SBATCH_OPTIONS:-}"

submit() {  # submit STAGE SBATCH_ARGS... with sbatch --parsable; prints the job id
  local stage=$1 id
  shift
  if (( DRY_RUN )); then
    echo "sbatch --parsable ${EXTRA[*]:+${EXTRA[*]} }$*" >&2
    echo "<$stage job id>"
    return
  fi
  id=$(sbatch --parsable ${EXTRA[@]+"${EXTRA[@]}"} "$@")
  echo "${id%%;*}"  # a multi-cluster reply is "id;cluster"
}

PRETRAIN_JOB=$(submit pretrain --job-name="memorag-pretrain-$NAME" --export=ALL,MEMORAG_OUTPUT="$OUT/pretrain" \
  slurm/pretrain.sbatch "$PRETRAIN")
SFT_JOB=$(submit sft --job-name="memorag-sft-$NAME" --dependency=afterok:"$PRETRAIN_JOB" \
  --export=ALL,MEMORAG_OUTPUT="$OUT/sft" slurm/sft.sbatch "$SFT" model.memory_weights="$OUT/pretrain/final")
LAST_JOB=$SFT_JOB
WEIGHTS="$OUT/sft/final"
if [[ -n "$RLGF" ]]; then
  RLGF_JOB=$(submit rlgf --job-name="memorag-rlgf-$NAME" --dependency=afterok:"$SFT_JOB" \
    --export=ALL,MEMORAG_OUTPUT="$OUT/rlgf" slurm/rlgf.sbatch "$RLGF" model.memory_weights="$OUT/sft/final")
  LAST_JOB=$RLGF_JOB
  WEIGHTS="$OUT/rlgf/final"
fi
if (( SHARDS > 1 )); then
  EVAL_JOB=$(submit eval --job-name="memorag-eval-$NAME" --dependency=afterok:"$LAST_JOB" --array=0-$((SHARDS - 1)) \
    --export=ALL,MEMORAG_OUTPUT="$OUT/eval" slurm/eval.sbatch "$EVAL" pipeline.memory_weights="$WEIGHTS")
  MERGE_JOB=$(submit merge --job-name="memorag-eval-merge-$NAME" --dependency=afterok:"$EVAL_JOB" \
    --export=ALL,MEMORAG_OUTPUT="$OUT/eval" slurm/eval-merge.sbatch "$EVAL" pipeline.memory_weights="$WEIGHTS")
else
  EVAL_JOB=$(submit eval --job-name="memorag-eval-$NAME" --dependency=afterok:"$LAST_JOB" \
    --export=ALL,MEMORAG_OUTPUT="$OUT/eval" slurm/eval.sbatch "$EVAL" pipeline.memory_weights="$WEIGHTS")
  MERGE_JOB=""
fi
echo "pretrain job $PRETRAIN_JOB -> $OUT/pretrain"
echo "sft job $SFT_JOB (after $PRETRAIN_JOB) -> $OUT/sft"
if [[ -n "$RLGF" ]]; then
  echo "rlgf job $RLGF_JOB (after $SFT_JOB) -> $OUT/rlgf"
fi
echo "eval job $EVAL_JOB (after $LAST_JOB$( (( SHARDS > 1 )) && echo ", $SHARDS shards")) -> $OUT/eval"
if [[ -n "$MERGE_JOB" ]]; then
  echo "merge job $MERGE_JOB (after $EVAL_JOB) -> $OUT/eval"
fi
