#!/usr/bin/env bash
# Register a finished training job's model with Vertex AI and serve it on an endpoint: a thin
# wrapper over `python -m trainer.deploy` (uploads JOB_DIR/model with the serving image, as a new
# model or a new version of PARENT_MODEL; creates an endpoint unless ENDPOINT is set; deploys,
# which takes 10-20 minutes).
#
#   PROJECT_ID=my-project REGION=us-central1 JOB_DIR=gs://my-bucket/vertex-bert-trainer/vbt-train-20260101-120000 \
#   IMAGE_URI=us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer-serve:abc1234 \
#     scripts/deploy.sh
#
# Required: PROJECT_ID, REGION, JOB_DIR (the training job's gs:// directory), IMAGE_URI (the serving
#   image: VARIANT=serve scripts/build-image.sh prints it; VARIANT=serve-onnx, the one without
#   TensorFlow, serves the model's ONNX copies).
# Optional: MACHINE_TYPE (n1-standard-4), MIN_REPLICAS (1), MAX_REPLICAS (1), ENDPOINT (an existing
#   endpoint's ID), DISPLAY_NAME, SERVICE_ACCOUNT, PRECISION, PYTHON (python3).
#   PARENT_MODEL: register the model as a new version of this model (ID or resource name).
#   VERSION_ALIASES: comma-separated aliases of the new version, e.g. candidate.
#   TRAFFIC_PERCENT=N: a canary beside the models ENDPOINT serves now, with N% of its traffic.
#   PROMOTE=1: all traffic and the `default` alias to the new version.
#   DRY_RUN=1 prints the requests as JSON and sends nothing.
# Promoting a deployed canary instead: PROJECT_ID, REGION, ENDPOINT, MODEL=MODEL_ID@VERSION and
#   PROMOTE=1 (no JOB_DIR or IMAGE_URI: nothing is uploaded).
# Arguments go to `python -m trainer.deploy` unchanged.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ -n "${MODEL:-}" ]]; then
  require PROJECT_ID REGION ENDPOINT PROMOTE
  flags=(--project "$PROJECT_ID" --region "$REGION" --model "$MODEL")
else
  require PROJECT_ID REGION JOB_DIR IMAGE_URI
  require_image serve serve-onnx
  flags=(--project "$PROJECT_ID" --region "$REGION" --job-dir "$JOB_DIR" --image-uri "$IMAGE_URI"
         --machine-type "${MACHINE_TYPE:-n1-standard-4}" --min-replicas "${MIN_REPLICAS:-1}"
         --max-replicas "${MAX_REPLICAS:-1}")
fi
optional ENDPOINT --endpoint
optional DISPLAY_NAME --display-name
optional SERVICE_ACCOUNT --service-account
optional PRECISION --precision
optional PARENT_MODEL --parent-model
optional VERSION_ALIASES --version-aliases
optional TRAFFIC_PERCENT --traffic-percent
if [[ "${PROMOTE:-0}" != 0 ]]; then flags+=(--promote); fi
if [[ "${DRY_RUN:-0}" != 0 ]]; then flags+=(--dry-run); fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -m trainer.deploy "${flags[@]}" "$@"
