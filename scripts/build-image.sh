#!/usr/bin/env bash
# Build the trainer image with Cloud Build and push it to Artifact Registry
# (cloudbuild.yaml: cached from :latest, tagged with the commit and latest).
#
#   PROJECT_ID=my-project REGION=us-central1 scripts/build-image.sh
#   PROJECT_ID=my-project REGION=us-central1 VARIANT=tpu scripts/build-image.sh
#   PROJECT_ID=my-project REGION=us-central1 VARIANT=serve scripts/build-image.sh
#   PROJECT_ID=my-project REGION=us-central1 VARIANT=serve-onnx scripts/build-image.sh
#
# Required: PROJECT_ID, REGION (the Artifact Registry location; use the region you train in).
# Optional: VARIANT (gpu: Dockerfile, also runs on CPU; tpu: Dockerfile.tpu; serve: Dockerfile.serve,
#   the prediction server; serve-onnx: Dockerfile.serve-onnx, the prediction server without
#   TensorFlow, for the model's ONNX copies), REPOSITORY (vertex-bert-trainer), IMAGE_NAME
#   (vertex-bert-trainer, vertex-bert-trainer-tpu, vertex-bert-trainer-serve or
#   vertex-bert-trainer-serve-onnx),
#   TAG (git's short commit hash, with -dirty when tracked files have uncommitted changes).
#   DRY_RUN=1 prints the gcloud command and the image URI, and builds nothing.
# Prints IMAGE_URI=... for the script that runs this image: VARIANT=gpu for train-cloud-gpu.sh and
# tune-cloud.sh, tpu for train-cloud-tpu.sh, serve or serve-onnx for deploy.sh. Each Dockerfile
# labels its image vertex-bert-trainer.variant=VARIANT, and each of those scripts refuses another
# variant's image.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require PROJECT_ID REGION
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${VARIANT:-gpu}" in
  gpu) dockerfile=Dockerfile; image="${IMAGE_NAME:-vertex-bert-trainer}" ;;
  tpu) dockerfile=Dockerfile.tpu; image="${IMAGE_NAME:-vertex-bert-trainer-tpu}" ;;
  serve) dockerfile=Dockerfile.serve; image="${IMAGE_NAME:-vertex-bert-trainer-serve}" ;;
  serve-onnx) dockerfile=Dockerfile.serve-onnx; image="${IMAGE_NAME:-vertex-bert-trainer-serve-onnx}" ;;
  *) echo "error: VARIANT must be gpu, tpu, serve or serve-onnx, got '${VARIANT}'" >&2; exit 2 ;;
esac
repository="${REPOSITORY:-vertex-bert-trainer}"
tag="${TAG:-}"
if [[ -z "$tag" ]]; then
  if ! tag="$(git -C "$root" rev-parse --short=7 HEAD 2>/dev/null)"; then
    echo "error: not a git checkout: set TAG to name the image version" >&2
    exit 2
  fi
  if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then tag="$tag-dirty"; fi
fi

# Manual builds may set SHORT_SHA themselves (gcloud builds submit --help, --substitutions);
# build triggers set it from the commit. .dockerignore doubles as the upload filter, so local
# runs/, caches and .git never leave the machine.
command=(gcloud builds submit "$root" --project "$PROJECT_ID" --config "$root/cloudbuild.yaml"
         --ignore-file .dockerignore
         --substitutions "_LOCATION=$REGION,_REPOSITORY=$repository,_IMAGE=$image,_DOCKERFILE=$dockerfile,SHORT_SHA=$tag")
image_uri="$REGION-docker.pkg.dev/$PROJECT_ID/$repository/$image:$tag"
if [[ "${DRY_RUN:-0}" != 0 ]]; then
  printf '%q ' "${command[@]}"
  echo
else
  "${command[@]}"
fi
echo "IMAGE_URI=$image_uri"
