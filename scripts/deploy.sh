#!/usr/bin/env bash
# Serve a finished training job's model on a Vertex AI endpoint: a thin wrapper over
# `python -m trainer.submit deploy` (uploads JOB_DIR/model with the serving image, creates an
# endpoint unless ENDPOINT is set, deploys; the deployment takes 10-20 minutes).
#
#   PROJECT_ID=my-project REGION=us-central1 JOB_DIR=gs://my-bucket/vertex-bert-trainer/vbt-train-20260101-120000 \
#   IMAGE_URI=us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer-serve:abc1234 \
#     scripts/deploy.sh
#
# Required: PROJECT_ID, REGION, JOB_DIR (the training job's gs:// directory), IMAGE_URI (the serving
#   image: VARIANT=serve scripts/build-image.sh prints it).
# Optional: MACHINE_TYPE (n1-standard-4), MIN_REPLICAS (1), MAX_REPLICAS (1), ENDPOINT (an existing
#   endpoint's ID), DISPLAY_NAME, SERVICE_ACCOUNT, PYTHON (python3).
#   DRY_RUN=1 prints the requests as JSON and sends nothing.
# Arguments go to `python -m trainer.submit deploy` unchanged.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require PROJECT_ID REGION JOB_DIR IMAGE_URI
require_image serve
flags=(deploy --project "$PROJECT_ID" --region "$REGION" --job-dir "$JOB_DIR" --image-uri "$IMAGE_URI"
       --machine-type "${MACHINE_TYPE:-n1-standard-4}" --min-replicas "${MIN_REPLICAS:-1}"
       --max-replicas "${MAX_REPLICAS:-1}")
optional ENDPOINT --endpoint
optional DISPLAY_NAME --display-name
optional SERVICE_ACCOUNT --service-account
optional PRECISION --precision
if [[ "${DRY_RUN:-0}" != 0 ]]; then flags+=(--dry-run); fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -m trainer.submit "${flags[@]}" "$@"
