#!/usr/bin/env bash
# Train on this machine (CPU, or a local GPU): `python -m trainer.task`, by default on the sample
# posts shipped in the package.
#
#   scripts/train-local.sh                                         # sample data
#   TRAINING_FILE=data/train.csv scripts/train-local.sh --epochs 1
#   scripts/train-local.sh --training-file data/train.csv --validation-file data/dev.csv
#
# Optional: TRAINING_FILE, VALIDATION_FILE, TESTING_FILE, JOB_DIR (default runs/run-TIMESTAMP),
#   PYTHON (python3). DRY_RUN=1 prints the command instead of running it.
# Arguments go to the trainer unchanged (python -m trainer.task --help).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

flags=()
optional TRAINING_FILE --training-file
optional VALIDATION_FILE --validation-file
optional TESTING_FILE --testing-file
optional JOB_DIR --job-dir

# ${flags[@]+...}: an empty array is "unbound" under set -u in bash 3.2 (macOS).
command=("${PYTHON:-python3}" -m trainer.task ${flags[@]+"${flags[@]}"} "$@")
if [[ "${DRY_RUN:-0}" != 0 ]]; then
  printf '%q ' "${command[@]}"
  echo
  exit 0
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${command[@]}"
