# Helpers sourced by the scripts in this folder.

# require VAR...: stop with one message naming every unset variable.
require() {
  local name missing=()
  for name in "$@"; do [[ -n "${!name:-}" ]] || missing+=("$name"); done
  if (( ${#missing[@]} )); then
    echo "error: set the environment variable(s) ${missing[*]} (see the top of $0)" >&2
    exit 2
  fi
}

# optional VAR --flag: append --flag "$VAR" to the array `flags` when VAR is set.
optional() {
  if [[ -n "${!1:-}" ]]; then flags+=("$2" "${!1}"); fi
}

# trainer_optional VAR --flag: append --flag "$VAR" to the array `trainer_flags` when VAR is set:
# flags for the trainer itself, which `submit` puts before the script's arguments, so that the
# same flag given there wins.
trainer_optional() {
  if [[ -n "${!1:-}" ]]; then trainer_flags+=("$2" "${!1}"); fi
}

# submit ARG...: exec `python -m trainer.submit "${flags[@]}" -- "${trainer_flags[@]}" ARG...`
# from the repository. The trainer arguments may start with a `--` of their own
# (`train-cloud-gpu.sh -- --epochs 3`, the form `trainer.submit` uses): that one is a separator,
# not an argument for the trainer.
submit() {
  if [[ "${1:-}" == -- ]]; then shift; fi
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -m trainer.submit "${flags[@]}" -- \
    ${trainer_flags[@]+"${trainer_flags[@]}"} "$@"
}

# The label each Dockerfile gives its image (gpu, tpu, serve or serve-onnx: VARIANT of build-image.sh).
VARIANT_LABEL=vertex-bert-trainer.variant

# variant_text VARIANT: the image as people build it.
variant_text() {
  case "$1" in
    gpu) echo "the GPU image (scripts/build-image.sh; it runs on CPU too)" ;;
    tpu) echo "the TPU image (VARIANT=tpu scripts/build-image.sh)" ;;
    serve) echo "the serving image (VARIANT=serve scripts/build-image.sh)" ;;
    serve-onnx) echo "the serving image without TensorFlow (VARIANT=serve-onnx scripts/build-image.sh)" ;;
    *) echo "an image labelled $VARIANT_LABEL=$1" ;;
  esac
}

# image_variant URI: "VARIANT|how it is known" for the image at URI, or "|why it is not". Its
# label is read from the registry without pulling the image, by skopeo, with the credentials
# `gcloud auth configure-docker` writes, for linux/amd64, the platform Vertex runs. Without it,
# the default names build-image.sh gives the images tell.
image_variant() {
  local uri=$1 labels name why="skopeo is not installed"
  if command -v skopeo >/dev/null 2>&1; then
    if labels=$(skopeo --command-timeout 60s --override-os linux --override-arch amd64 inspect \
        --format '{{range $k, $v := .Labels}}{{$k}}={{$v}}{{println}}{{end}}' "docker://$uri" 2>&1); then
      labels=$(grep -m 1 "^$VARIANT_LABEL=" <<<"$labels" || true)
      if [[ -n "$labels" ]]; then echo "${labels#*=}|its label $labels"; return; fi
      why="it has no $VARIANT_LABEL label"
    else
      why="skopeo could not read it: $(tail -n 1 <<<"$labels")"
    fi
  fi
  name="${uri%@*}"; name="${name##*/}"; name="${name%%:*}"
  case "$name" in
    vertex-bert-trainer) echo "gpu|its name $name" ;;
    vertex-bert-trainer-tpu) echo "tpu|its name $name" ;;
    vertex-bert-trainer-serve) echo "serve|its name $name" ;;
    vertex-bert-trainer-serve-onnx) echo "serve-onnx|its name $name" ;;
    *) echo "|$why" ;;
  esac
}

# require_image VARIANT...: stop when IMAGE_URI is another image than one of those this script
# runs (a GPU image on a TPU VM fails there, after the machine is paid for); when the image does
# not say which it is, say which ones the script needs and go on.
require_image() {
  local found have how needs="" variant
  for variant in "$@"; do needs+="${needs:+ or }$(variant_text "$variant")"; done
  found=$(image_variant "$IMAGE_URI")
  have=${found%%|*}; how=${found#*|}
  if [[ -z "$have" ]]; then
    echo "note: IMAGE_URI: cannot tell which image $IMAGE_URI is ($how); $(basename "$0") needs $needs" >&2
  elif [[ " $* " != *" $have "* ]]; then
    echo "error: IMAGE_URI $IMAGE_URI is $(variant_text "$have"), by $how; $(basename "$0") needs $needs" >&2
    exit 2
  fi
}
