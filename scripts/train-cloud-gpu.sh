#!/usr/bin/env bash
# Train on Vertex AI with GPUs: a thin wrapper over `python -m trainer.submit train`.
#
#   PROJECT_ID=my-project REGION=us-central1 BUCKET=my-bucket \
#   IMAGE_URI=us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer:abc1234 \
#     scripts/train-cloud-gpu.sh --training-file gs://my-bucket/data/train.csv --epochs 3
#
# Required: PROJECT_ID, REGION, BUCKET, IMAGE_URI: the GPU image, which scripts/build-image.sh
#   prints (not the TPU or serving image: a job with another image than the GPU one is refused
#   when its label or name says so).
# Optional: MACHINE_TYPE (n1-standard-8), ACCELERATOR_TYPE (NVIDIA_TESLA_T4),
#   ACCELERATOR_COUNT (1; 0 runs on CPU only), REPLICA_COUNT (0; machines beyond the chief, for
#   multi-worker training), JOB_DIR (gs://BUCKET/vertex-bert-trainer/DISPLAY_NAME), DISPLAY_NAME,
#   SERVICE_ACCOUNT, TENSORBOARD, PYTHON (python3).
#   SCHEDULING: standard (default), spot (Spot VMs: cheaper, may be preempted; the trainer
#   resumes from its last epoch) or flex-start (queued until the GPUs are free; L4, A100, H100,
#   H200 or B200 only), MAX_WAIT (flex-start only: how long to queue, e.g. 30m, 2h, 1d or
#   seconds; default 1 day, 0 no limit), EXPERIMENT (log the run to this Vertex AI Experiments
#   experiment: the trainer's --experiment).
#   DRY_RUN=1 prints the job as JSON and submits nothing.
# Arguments go to the trainer unchanged (python -m trainer.task --help), with or without a
# leading `--`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require PROJECT_ID REGION BUCKET IMAGE_URI
require_image gpu
flags=(train --project "$PROJECT_ID" --region "$REGION" --bucket "$BUCKET" --image-uri "$IMAGE_URI"
       --machine-type "${MACHINE_TYPE:-n1-standard-8}" --replica-count "${REPLICA_COUNT:-0}")
if [[ "${ACCELERATOR_COUNT:-1}" != 0 ]]; then
  flags+=(--accelerator-type "${ACCELERATOR_TYPE:-NVIDIA_TESLA_T4}" --accelerator-count "${ACCELERATOR_COUNT:-1}")
fi
optional JOB_DIR --job-dir
optional DISPLAY_NAME --display-name
optional SERVICE_ACCOUNT --service-account
optional TENSORBOARD --tensorboard
optional SCHEDULING --scheduling
optional MAX_WAIT --max-wait
if [[ "${DRY_RUN:-0}" != 0 ]]; then flags+=(--dry-run); fi
trainer_optional EXPERIMENT --experiment

submit "$@"
