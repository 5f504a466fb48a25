#!/usr/bin/env bash
# The whole loop on Vertex AI Pipelines: train -> evaluate -> gate -> register -> deploy. A thin
# wrapper over `python -m trainer.pipeline run`, which compiles the KFP pipeline and submits it.
#
#   PROJECT_ID=my-project REGION=us-central1 BUCKET=my-bucket \
#   IMAGE_URI=us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer:abc1234 \
#   SERVING_IMAGE_URI=us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer-serve:abc1234 \
#   GATE='validation.macro_f1>=0.80' PARENT_MODEL=1234567890 ENDPOINT=9876543210 TRAFFIC_PERCENT=10 \
#     scripts/pipeline-cloud.sh --training-file gs://my-bucket/data/train.csv --epochs 3
#
# Required: PROJECT_ID, REGION, BUCKET, IMAGE_URI (the trainer image, which scripts/build-image.sh
#   prints: every step runs in it, and the training job too), SERVING_IMAGE_URI (the serving
#   image: VARIANT=serve scripts/build-image.sh), GATE (SPLIT.METRIC OP THRESHOLD, OP one of
#   >=, >, <=, <: register and deploy run only when the run's metrics.json passes it).
# Optional, the training job: MACHINE_TYPE (n1-standard-8), ACCELERATOR_TYPE (NVIDIA_TESLA_T4),
#   ACCELERATOR_COUNT (1; 0 trains on CPU only), SCHEDULING (standard, spot, flex-start),
#   MAX_WAIT, JOB_DIR (gs://BUCKET/vertex-bert-trainer/DISPLAY_NAME).
# Optional, register and deploy (as scripts/deploy.sh): PARENT_MODEL (the new model becomes its
#   version), VERSION_ALIASES, ENDPOINT, TRAFFIC_PERCENT (a canary's share of ENDPOINT's traffic),
#   PROMOTE=1 (all traffic and the default alias).
# Optional: DISPLAY_NAME, SERVICE_ACCOUNT (the pipeline and its jobs run as it), PYTHON (python3).
#   DRY_RUN=1 prints the PipelineJob as JSON and submits nothing.
# Arguments go to the trainer unchanged (python -m trainer.task --help), with or without a
# leading `--`. Needs the `pipeline` extra here (pip install '.[pipeline]'); the images need not
# carry KFP: each step installs it when it starts.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require PROJECT_ID REGION BUCKET IMAGE_URI SERVING_IMAGE_URI GATE
require_image gpu
flags=(run --gate "$GATE" --project "$PROJECT_ID" --region "$REGION" --bucket "$BUCKET"
       --image-uri "$IMAGE_URI" --serving-image-uri "$SERVING_IMAGE_URI"
       --machine-type "${MACHINE_TYPE:-n1-standard-8}")
if [[ "${ACCELERATOR_COUNT:-1}" != 0 ]]; then
  flags+=(--accelerator-type "${ACCELERATOR_TYPE:-NVIDIA_TESLA_T4}" --accelerator-count "${ACCELERATOR_COUNT:-1}")
fi
optional SCHEDULING --scheduling
optional MAX_WAIT --max-wait
optional JOB_DIR --job-dir
optional DISPLAY_NAME --display-name
optional SERVICE_ACCOUNT --service-account
optional PARENT_MODEL --parent-model
optional VERSION_ALIASES --version-aliases
optional ENDPOINT --endpoint
optional TRAFFIC_PERCENT --traffic-percent
if [[ "${PROMOTE:-0}" != 0 ]]; then flags+=(--promote); fi
if [[ "${DRY_RUN:-0}" != 0 ]]; then flags+=(--dry-run); fi

if [[ "${1:-}" == -- ]]; then shift; fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -m trainer.pipeline "${flags[@]}" -- "$@"
