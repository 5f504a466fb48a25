#!/usr/bin/env bash
# Train on a Vertex AI TPU VM (TPU v2 or v3 with 8 cores, or TPU v5e with 1, 4 or 8 chips): a thin
# wrapper over `python -m trainer.submit train --tpu`. Needs the TPU image (VARIANT=tpu scripts/build-image.sh).
#
#   PROJECT_ID=my-project REGION=us-central1 BUCKET=my-bucket \
#   IMAGE_URI=us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer-tpu:abc1234 \
#     scripts/train-cloud-tpu.sh --training-file gs://my-bucket/data/train.csv --batch-size 128
#
# Required: PROJECT_ID, REGION (one with TPUs, e.g. us-central1), BUCKET, IMAGE_URI: the TPU image,
#   which VARIANT=tpu scripts/build-image.sh prints (the GPU image cannot use a TPU: it is refused
#   when its label or name says so).
# Optional: TPU_VERSION (v2, v3 or v5e; default v2), TPU_CHIPS (v5e only: 1, 4 or 8; default 4),
#   JOB_DIR, DISPLAY_NAME, SERVICE_ACCOUNT, TENSORBOARD, PYTHON (python3).
#   SCHEDULING: standard (default) or spot (Spot VMs: cheaper, may be preempted; the trainer
#   resumes from its last epoch; flex-start with MAX_WAIT: Vertex documents it for GPUs only,
#   so a TPU gets a warning), EXPERIMENT (log the run to
#   this Vertex AI Experiments experiment: the trainer's --experiment).
#   DRY_RUN=1 prints the job as JSON and submits nothing.
# Arguments go to the trainer unchanged (python -m trainer.task --help), with or without a
# leading `--`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require PROJECT_ID REGION BUCKET IMAGE_URI
require_image tpu
flags=(train --project "$PROJECT_ID" --region "$REGION" --bucket "$BUCKET" --image-uri "$IMAGE_URI"
       --tpu "${TPU_VERSION:-v2}")
optional TPU_CHIPS --tpu-chips
optional JOB_DIR --job-dir
optional DISPLAY_NAME --display-name
optional SERVICE_ACCOUNT --service-account
optional TENSORBOARD --tensorboard
optional SCHEDULING --scheduling
optional MAX_WAIT --max-wait
if [[ "${DRY_RUN:-0}" != 0 ]]; then flags+=(--dry-run); fi
trainer_optional EXPERIMENT --experiment

submit "$@"
