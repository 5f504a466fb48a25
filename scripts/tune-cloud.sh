#!/usr/bin/env bash
# Hyperparameter tuning on Vertex AI: a thin wrapper over `python -m trainer.submit tune`.
# Each trial is one training job; Vertex passes the tuned values as trainer flags
# (--learning-rate=..., --batch-size=..., ...) and maximizes --selection-metric (val_macro_f1).
#
#   PROJECT_ID=my-project REGION=us-central1 BUCKET=my-bucket \
#   IMAGE_URI=us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer:abc1234 \
#     scripts/tune-cloud.sh --training-file gs://my-bucket/data/train.csv
#
# Required: PROJECT_ID, REGION, BUCKET, IMAGE_URI: the GPU image, which scripts/build-image.sh prints.
# Optional: MAX_TRIAL_COUNT (12), PARALLEL_TRIAL_COUNT (3), PARAMETERS (comma-separated subset of
#   learning-rate,batch-size,dropout,warmup-fraction,weight-decay,layer-decay,epochs; default all),
#   MACHINE_TYPE (n1-standard-8), ACCELERATOR_TYPE (NVIDIA_TESLA_T4), ACCELERATOR_COUNT (1; 0 runs
#   on CPU only), JOB_DIR, DISPLAY_NAME, SERVICE_ACCOUNT, TENSORBOARD, PYTHON (python3).
#   SCHEDULING and MAX_WAIT for every trial, as in train-cloud-gpu.sh, and EXPERIMENT: each
#   trial logs its own run (named after the job and the trial) to this Vertex AI Experiments
#   experiment, so the trials' validation curves can be compared side by side.
#   DRY_RUN=1 prints the job as JSON and submits nothing.
# Arguments go to every trial's trainer unchanged, with or without a leading `--`; do not repeat
# a tuned flag (one of PARAMETERS) there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require PROJECT_ID REGION BUCKET IMAGE_URI
require_image gpu
flags=(tune --project "$PROJECT_ID" --region "$REGION" --bucket "$BUCKET" --image-uri "$IMAGE_URI"
       --machine-type "${MACHINE_TYPE:-n1-standard-8}"
       --max-trial-count "${MAX_TRIAL_COUNT:-12}" --parallel-trial-count "${PARALLEL_TRIAL_COUNT:-3}")
if [[ "${ACCELERATOR_COUNT:-1}" != 0 ]]; then
  flags+=(--accelerator-type "${ACCELERATOR_TYPE:-NVIDIA_TESLA_T4}" --accelerator-count "${ACCELERATOR_COUNT:-1}")
fi
optional PARAMETERS --parameters
optional JOB_DIR --job-dir
optional DISPLAY_NAME --display-name
optional SERVICE_ACCOUNT --service-account
optional TENSORBOARD --tensorboard
optional SCHEDULING --scheduling
optional MAX_WAIT --max-wait
if [[ "${DRY_RUN:-0}" != 0 ]]; then flags+=(--dry-run); fi
trainer_optional EXPERIMENT --experiment

submit "$@"
