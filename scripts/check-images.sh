#!/usr/bin/env bash
# Build the images from their real Dockerfiles, unchanged, without a Docker engine (buildah), and
# smoke-run each in a container as Vertex AI runs it. As root:
#
#   bash scripts/check-images.sh [all|tpu|gpu|serve|serve-onnx ...]      (default: all)
#
# - every image: its vertex-bert-trainer.variant label, by which the cloud scripts refuse another
#   variant's image (scripts/lib.sh, require_image).
# - gpu, tpu: the image's ENTRYPOINT with --dry-run and the variables Vertex sets (AIP_MODEL_DIR,
#   AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR in a mounted directory, CLOUD_ML_JOB_ID, a
#   tuning trial's CLOUD_ML_TRIAL_ID with /tmp/hypertune mounted). Every container runs in a
#   network namespace of its own that has only loopback, so a run that needed to fetch anything
#   fails. The first of them in a run writes and checks every copy (int8, bfloat16, ONNX) and the
#   report's explanations, and its model is what the serving checks serve; the second leaves those
#   out (they were about 70% of a dry run's time; `all` checks tpu first, whose TensorFlow 2.20 no
#   other CI line exports copies with, while gpu's 2.21 is the host's test lines'). gpu also: two
#   containers as Vertex's chief and worker (CLUSTER_SPEC and TF_CONFIG on 127.0.0.1 ports)
#   train one run under MultiWorkerMirroredStrategy, without the copies too; the worker's output
#   directory is mounted read-only, so it passes only if the chief alone writes the artifacts.
# - serve, serve-onnx: the ENTRYPOINT with the AIP_* serving variables and the model the first training
#   check exported (serve-onnx: its ONNX copies, which the training check writes): health 503
#   then 200 (the seconds from the container's start to that 200 are in the row: the start time
#   of each server; serve-onnx's as a share of serve's when both run, a figure, not a check), predictions
#   equal to `trainer.predict`'s (run in the same image), 400 for a bad request, exit 0 on
#   SIGTERM; serve with --runtime tensorflow (its default, auto, may take an ONNX copy), serve-onnx
#   with --runtime onnx.
#
# It ends with one table (markdown): image, size, build seconds and each check's result, and exits
# 0 only when every check passed (2 on bad arguments).
#
# The base image, python:3.11.13-slim-bookworm, is not pulled: a stand-in is made once from
# Debian's packages (debootstrap) and cached. Settings (environment):
#   VBT_CHECK_DIR   buildah's store for these builds, the stand-in base and each run's files
#                   (default /var/cache/vbt-check-images)
#   STORAGE_DRIVER  overlay where the kernel mounts it, else vfs (a full copy per layer)
#   KEEP_IMAGES=1   keep the built images and their layers (faster rebuilds); by default each is
#                   removed once checked, so the disk holds one at a time; the stand-in base stays
#   RUN_TIMEOUT     seconds a container may run before it counts as hung (default 600)
#   BUILD_ATTEMPTS  tries of a build that fails on the registry (a read timed out, a connection
#                   dropped), not on its Dockerfile (default 3)
#   SKIP_IF_SHORT=1 an image whose build the disk cannot hold is skipped (a row says so), not
#                   failed; CI sets it
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${VBT_CHECK_DIR:-/var/cache/vbt-check-images}"
run_timeout="${RUN_TIMEOUT:-600}"
build_attempts="${BUILD_ATTEMPTS:-3}"
base=docker.io/library/python:3.11.13-slim-bookworm
declare -A dockerfile=([tpu]=Dockerfile.tpu [gpu]=Dockerfile [serve]=Dockerfile.serve
                      [serve-onnx]=Dockerfile.serve-onnx)
declare -A size build_seconds ready_seconds
# Free disk (GB) an image's build and checks need, measured peaks with room to spare
# (docs/vertex.md); vfs copies the whole tree per layer, so there each image is one layer.
declare -A need_overlay=([tpu]=7 [gpu]=16 [serve]=7 [serve-onnx]=2) need_vfs=([tpu]=12 [gpu]=30 [serve]=12 [serve-onnx]=4)
rows=()         # "image|check|result" in the order checked
netns_list=()   # network namespaces to delete on exit
failed=0
served_by=""    # the image whose training check wrote $dir/model in this run
# A dry run without the checked copies and the report's explanations: a training check after the
# first, and the replicas check (their strategy and who writes are what they check).
no_copies=(--export-int8 off --export-bfloat16 off --export-onnx off --report-explanations 0)

die() { echo "error: $*" >&2; exit 2; }
say() { echo "check-images: $*"; }

images=()
for arg in "${@:-all}"; do
  case "$arg" in
    all) images+=(tpu gpu serve serve-onnx) ;;
    tpu|gpu|serve|serve-onnx) images+=("$arg") ;;
    *) die "unknown image '$arg'; usage: $0 [all|tpu|gpu|serve|serve-onnx ...]" ;;
  esac
done
mapfile -t images < <(printf '%s\n' tpu gpu serve serve-onnx | grep -Fxf <(printf '%s\n' "${images[@]}"))
(( EUID == 0 )) || die "$0 builds with buildah's chroot isolation, which needs root: run it as root"

# record IMAGE CHECK OK|FAIL [DETAIL]: one row of the final table.
record() {
  local result="$3"
  [[ "$3" == ok ]] || failed=1
  rows+=("$1|$2|$result${4:+ ($4)}")
  say "$1: $2: $result${4:+ ($4)}"
}

# skip IMAGE CHECK REASON: a check that could not run here; a failure unless SKIP_IF_SHORT=1.
skip() {
  if [[ "${SKIP_IF_SHORT:-0}" == 0 ]]; then record "$1" "$2" FAIL "$3"; return; fi
  rows+=("$1|$2|skipped ($3)")
  say "$1: $2: skipped ($3)"
}

# room IMAGE: whether the disk holds the image's build and checks.
room() {
  local need free
  if [[ "$driver" == overlay ]]; then need=${need_overlay[$1]}; else need=${need_vfs[$1]}; fi
  free=$(df -P -BG "$dir" | awk 'NR == 2 {print int($4)}')
  (( free >= need )) && return 0
  skip "$1" build "needs $need GB free in $dir with $driver storage, $free GB are"
  return 1
}

install_tools() {
  local missing=()
  command -v buildah >/dev/null || missing+=(buildah)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v ip >/dev/null || missing+=(iproute2)
  (( ${#missing[@]} )) || return 0
  say "installing ${missing[*]} from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Overlay needs a kernel that mounts it here; vfs works everywhere.
storage_driver() {
  if [[ -n "${STORAGE_DRIVER:-}" ]]; then echo "$STORAGE_DRIVER"; return; fi
  local probe="$dir/overlay-probe"
  mkdir -p "$probe"/{lower,upper,work,merged}
  if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" \
      "$probe/merged" 2>/dev/null; then
    umount "$probe/merged"; echo overlay
  else
    echo vfs
  fi
  rm -rf "$probe"
}

bah() { buildah --root "$dir/storage" --runroot "$dir/run" --storage-driver "$driver" "$@"; }

# The stand-in for python:3.11.13-slim-bookworm, made once: Debian bookworm's own Python.
make_base() {
  say "base: $base is a STAND-IN made with debootstrap from Debian's packages, not the real"
  say "base: image: Debian's Python 3.11.2 and pip 23.0 in /usr/bin (the real one: Python 3.11.13"
  say "base: in /usr/local/bin), with the host's CA bundle so that pip trusts the same registry"
  if [[ -n "$(bah images --quiet "$base" 2>/dev/null)" ]]; then say "base: cached"; return; fi
  local rootfs="$dir/base/rootfs" mirror
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  rm -rf "$dir/base"; mkdir -p "$dir/base"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$rootfs" "${mirror:-http://deb.debian.org/debian}" >"$dir/base/debootstrap.log" 2>&1 \
    || { tail -n 20 "$dir/base/debootstrap.log" >&2; die "debootstrap failed (log: $dir/base/debootstrap.log)"; }
  DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get install -y -qq python-is-python3 \
    >"$dir/base/apt.log" 2>&1 || { cat "$dir/base/apt.log" >&2; die "python-is-python3 did not install in the stand-in"; }
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  tar -C "$rootfs" -cf "$dir/base/rootfs.tar" .
  printf 'FROM scratch\nADD rootfs.tar /\nCMD ["python3"]\n' >"$dir/base/Containerfile"
  bah bud --quiet --isolation chroot -f "$dir/base/Containerfile" -t "$base" "$dir/base" >/dev/null
  rm -rf "$dir/base"
}

# A build that failed on the registry, not on its Dockerfile: pip's download read timed out or the
# connection dropped (stop 79's CI lost its GPU image to one ReadTimeoutError from
# files.pythonhosted.org; pip's --retries do not cover a download cut off mid-stream, pypa/pip#12383).
registry_failures='ReadTimeoutError|ConnectTimeoutError|ProtocolError|IncompleteRead|Connection (reset|aborted|refused)|Temporary failure in name resolution|HTTP error 5[0-9][0-9]'
# registry_failure LOG: the log's first registry failure (up to 80 characters after it), or nothing.
registry_failure() { grep -m 1 -o -E "($registry_failures).{0,80}" "$1" || true; }

# build IMAGE: build it from its Dockerfile; a registry failure is retried (BUILD_ATTEMPTS in all,
# the log says so), any other failure fails at once.
build() {
  local name=$1 start attempt=1 failure
  start=$(date +%s)
  say "$name: building ${dockerfile[$name]}"
  until bah bud --isolation chroot --pull=never --layers="$([[ $driver == overlay ]] && echo true || echo false)" \
      -f "$root/${dockerfile[$name]}" \
      -t "vbt-check-$name" "$root" >"$work/$name-build.log" 2>&1; do
    failure=$(registry_failure "$work/$name-build.log")
    if (( attempt < build_attempts )) && [[ -n "$failure" ]]; then
      say "$name: build attempt $attempt of $build_attempts failed on the registry ($failure); again"
      cp "$work/$name-build.log" "$work/$name-build.$attempt.log"
      attempt=$(( attempt + 1 ))
      continue
    fi
    build_seconds[$name]=$(( $(date +%s) - start ))
    tail -n 30 "$work/$name-build.log" >&2
    record "$name" "build" FAIL "log: $work/$name-build.log"
    return 1
  done
  build_seconds[$name]=$(( $(date +%s) - start ))
  size[$name]=$(bah images --format '{{.Size}}' "localhost/vbt-check-$name" | head -n 1)
  local note="${build_seconds[$name]} s"
  (( attempt == 1 )) || note+=", attempt $attempt of $build_attempts"
  record "$name" "build" ok "$note"
}

# check_label IMAGE: the image carries the label by which the cloud scripts tell it from the
# other images (scripts/lib.sh, require_image), with its own variant.
check_label() {
  local label
  label=$(bah inspect --type image --format '{{index .OCIv1.Config.Labels "vertex-bert-trainer.variant"}}' \
    "localhost/vbt-check-$1" || true)
  if [[ "$label" == "$1" ]]; then
    record "$1" label ok "vertex-bert-trainer.variant=$label"
  else
    record "$1" label FAIL "vertex-bert-trainer.variant is '$label', not '$1'"
  fi
}

# netns NAME: a network namespace with only loopback, up.
netns() {
  ip netns add "$1"
  netns_list+=("$1")
  ip netns exec "$1" ip link set lo up
}

# run_entrypoint NETNS IMAGE LOG [--entrypoint PROGRAM] [buildah run options...] -- ARG...: the
# image's ENTRYPOINT (or PROGRAM) with ARG... in a new container, as `docker run IMAGE ARG...`
# does; stdout to LOG.out, stderr to LOG.err.
run_entrypoint() {
  local ns=$1 image=$2 log=$3; shift 3
  local options=() container entrypoint=()
  while [[ "$1" != -- ]]; do
    if [[ "$1" == --entrypoint ]]; then entrypoint=("$2"); shift 2; continue; fi
    options+=("$1"); shift
  done
  shift
  container=$(bah from --quiet --pull-never "localhost/vbt-check-$image")
  (( ${#entrypoint[@]} )) || mapfile -t entrypoint < <(bah inspect --type image \
    --format '{{range .OCIv1.Config.Entrypoint}}{{println .}}{{end}}' "localhost/vbt-check-$image" | sed '/^$/d')
  local status=0
  ip netns exec "$ns" timeout --kill-after=10 "$run_timeout" \
    buildah --root "$dir/storage" --runroot "$dir/run" --storage-driver "$driver" \
    run --isolation chroot "${options[@]}" "$container" -- "${entrypoint[@]}" "$@" \
    >"$log.out" 2>"$log.err" || status=$?
  bah rm "$container" >/dev/null
  return "$status"
}

# A container's main process: the deepest descendant of its `buildah run` that is not buildah's.
container_pid() {
  local pid=$1 child found=""
  for child in $(ps -o pid= --ppid "$pid"); do
    found=$(container_pid "$child")
    [[ -n "$found" ]] && { echo "$found"; return; }
    [[ "$(ps -o args= -p "$child")" != buildah* ]] && { echo "$child"; return; }
  done
}

# Lines a normal start must not print: accelerator libraries complaining about a missing device.
ACCELERATOR_NOISE='cuInit|libcuda|cudart|cuda_|TPU accelerator type|TPU worker hostnames|libtpu|Source Location Trace|InitGoogle'

# check_stderr IMAGE FILE: a normal start prints nothing of the accelerator libraries.
check_stderr() {
  if grep -Eq "$ACCELERATOR_NOISE" "$2"; then
    record "$1" "stderr: no accelerator-library lines" FAIL "$(grep -Ec "$ACCELERATOR_NOISE" "$2") lines in $2"
  else
    record "$1" "stderr: no accelerator-library lines" ok "$(wc -l <"$2") stderr lines in all"
  fi
}

# check_training IMAGE: the first in a run writes every copy and the model the serving checks
# serve; a later one runs without the copies (no_copies).
check_training() {
  local name=$1 out="$work/$1" seconds start status=0 lean=() note=""
  if [[ -n "$served_by" ]]; then lean=("${no_copies[@]}"); note=", no copies: $served_by's check wrote them"; fi
  mkdir -p "$out/vertex" "$out/hypertune"
  netns "vbt-check-$name-$$"
  start=$(date +%s)
  run_entrypoint "vbt-check-$name-$$" "$name" "$out/dry-run" \
    -v "$out/vertex:/vertex" -v "$out/hypertune:/tmp/hypertune" \
    -e AIP_MODEL_DIR=/vertex/model/ -e AIP_CHECKPOINT_DIR=/vertex/checkpoints/ \
    -e AIP_TENSORBOARD_LOG_DIR=/vertex/logs/ -e CLOUD_ML_JOB_ID="check-$name" -e CLOUD_ML_TRIAL_ID=1 \
    -- --dry-run "${lean[@]}" || status=$?
  seconds=$(( $(date +%s) - start ))
  if (( status == 0 )); then
    record "$name" "ENTRYPOINT --dry-run, AIP_* variables, no network" ok "$seconds s$note"
  else
    tail -n 20 "$out/dry-run.err" >&2
    record "$name" "ENTRYPOINT --dry-run, AIP_* variables, no network" FAIL \
      "exit $status after $seconds s$( (( status == 124 )) && echo ': hung')"
    return 0
  fi
  local missing=() path
  for path in model/saved_model.pb checkpoints/job.json metrics.json config.json report.html; do
    [[ -e "$out/vertex/$path" ]] || missing+=("$path")
  done
  find "$out/vertex/logs" -name 'events.out.tfevents.*' | grep -q . || missing+=("logs/ (TensorBoard events)")
  if (( ${#missing[@]} )); then
    record "$name" "artifacts where AIP_* say" FAIL "missing: ${missing[*]}"
  else
    record "$name" "artifacts where AIP_* say" ok
  fi
  if grep -q '"val_macro_f1"' "$out/hypertune/output.metrics" 2>/dev/null; then
    record "$name" "hypertune metric in /tmp/hypertune" ok
  else
    record "$name" "hypertune metric in /tmp/hypertune" FAIL "no val_macro_f1 line"
  fi
  if grep -q 'strategy: default (--distribution auto: no accelerator' "$out/dry-run.out" \
      && ! grep -qi 'strategy: tpu\|TPU_SYSTEM' "$out/dry-run.out"; then
    record "$name" "logs: no accelerator found" ok
  else
    record "$name" "logs: no accelerator found" FAIL "see $out/dry-run.out"
  fi
  check_stderr "$name" "$out/dry-run.err"
  if [[ -z "$served_by" ]]; then   # what the serving checks serve
    rm -rf "$dir/model"; cp -r "$out/vertex/model" "$dir/model"; served_by=$name
  fi
}

# Vertex's chief and worker: two containers, one cluster on 127.0.0.1, one output directory.
check_replicas() {
  local name=$1 out="$work/$1-replicas" ns="vbt-check-replicas-$$" start seconds
  mkdir -p "$out/vertex"
  netns "$ns"
  local cluster='"chief": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]'
  local spec='"workerpool0": ["127.0.0.1:2222"], "workerpool1": ["127.0.0.1:2223"]'
  start=$(date +%s)
  local role mount pids=() statuses=()
  for role in chief worker; do
    local pool=workerpool0; [[ $role == worker ]] && pool=workerpool1
    mount="$out/vertex:/vertex"; [[ $role == worker ]] && mount="$out/vertex:/vertex:ro"
    run_entrypoint "$ns" "$name" "$out/$role" -v "$mount" \
      -e AIP_MODEL_DIR=/vertex/model/ -e AIP_CHECKPOINT_DIR=/vertex/checkpoints/ \
      -e AIP_TENSORBOARD_LOG_DIR=/vertex/logs/ -e CLOUD_ML_JOB_ID="check-replicas" \
      -e "TF_CONFIG={\"cluster\": {$cluster}, \"task\": {\"type\": \"$role\", \"index\": 0}}" \
      -e "CLUSTER_SPEC={\"cluster\": {$spec}, \"task\": {\"type\": \"$pool\", \"index\": 0}}" \
      -- --dry-run "${no_copies[@]}" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do local s=0; wait "$pid" || s=$?; statuses+=("$s"); done
  seconds=$(( $(date +%s) - start ))
  if [[ "${statuses[*]}" == "0 0" ]] && grep -q 'strategy multiworker with 2 replica' "$out/chief.out" \
      && grep -q 'worker role: worker 0' "$out/worker.out" && [[ -e "$out/vertex/metrics.json" ]]; then
    record "$name" "chief + worker, MultiWorkerMirroredStrategy, chief alone writes" ok "$seconds s"
  else
    tail -n 15 "$out/chief.err" "$out/worker.err" >&2
    record "$name" "chief + worker, MultiWorkerMirroredStrategy, chief alone writes" FAIL \
      "exits ${statuses[*]}; logs in $out"
  fi
}

# compare_predictions CSV JSON: the server's answer equals trainer.predict's rows (label and every
# class probability within 1e-5; the two batch the texts differently).
compare_predictions() {
  python3 - "$1" "$2" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
answer = json.load(open(sys.argv[2]))["predictions"]
assert len(rows) == len(answer), (len(rows), len(answer))
for row, served in zip(rows, answer):
    assert row["predicted_label"] == served["label"], (row, served)
    for name, p in served["probabilities"].items():
        assert abs(float(row["probability_" + name]) - p) < 1e-5, (name, row, served)
PY
}

# refusal MODEL_DIR PRECISION: why the export did not write that copy (its precisions.json).
refusal() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], {}).get("why"))' \
    "$1/precisions.json" "$2" 2>/dev/null || echo "precisions.json unreadable"
}

# status NETNS URL [curl options]: the HTTP status code (000 when nothing answers).
status() { local ns=$1 url=$2; shift 2; ip netns exec "$ns" curl -s -o /dev/null -w '%{http_code}' "$@" "$url" || true; }

# check_serving IMAGE: the serving image IMAGE (serve: --runtime tensorflow, the runtime it is
# for, which its default --runtime auto passes over for an ONNX copy within 1.1x of it; or
# serve-onnx: --runtime onnx) as Vertex runs it, with the model the first training check exported.
check_serving() {
  local name=$1 out="$work/$1" ns="vbt-check-$1-$$" runtime=(--runtime tensorflow)
  [[ "$name" == serve-onnx ]] && runtime=(--runtime onnx)
  if [[ ! -d "$dir/model" ]]; then
    skip "$name" "a model exported by a training check" "none yet: check tpu or gpu first"
    return 0
  fi
  if [[ "$name" == serve-onnx ]]; then   # the training check's export wrote them (--export-onnx auto)
    if [[ ! -f "$dir/model/onnx/onnx.json" ]]; then
      record "$name" "ONNX copies in the training check's model" FAIL "no onnx/onnx.json in $dir/model"
      return 0
    fi
    # The int8 copy is written only when its labels agree with float32's; a tiny check run's
    # near-tied logits may flip, and then precisions.json says why it was refused.
    local int8="onnx-int8 too"
    [[ -f "$dir/model/onnx-int8/onnx.json" ]] || int8="onnx-int8 refused: $(refusal "$dir/model" onnx-int8)"
    record "$name" "ONNX copies in the training check's model" ok "onnx; $int8"
  fi
  say "$name: serving $dir/model, exported by ${served_by:-an earlier run}'s training check"
  mkdir -p "$out"; chmod 0777 "$out"   # the serving images run as uid 1000
  printf 'text\nwhat a great day\nworst service ever\nthe bus leaves at noon\n' >"$out/texts.csv"
  netns "$ns"
  if run_entrypoint "$ns" "$name" "$out/predict" -v "$dir/model:/model:ro" -v "$out:/data" \
      --entrypoint python -- -m trainer.predict --model-dir /model --input /data/texts.csv \
      --output /data/predicted.csv "${runtime[@]}"; then :; fi
  local health=/v1/endpoints/1/deployedModels/2 predict=/v1/endpoints/1/deployedModels/2:predict
  local started
  started=$(date +%s.%N)
  run_entrypoint "$ns" "$name" "$out/server" -v "$dir/model:/model:ro" -e AIP_HTTP_PORT=8080 \
    -e AIP_HEALTH_ROUTE=$health -e AIP_PREDICT_ROUTE=$predict -e AIP_STORAGE_URI=/model -- "${runtime[@]}" &
  local server=$! codes=() code last="" i ready=""
  for (( i = 0; i < 600; i++ )); do   # up to 120 s
    code=$(status "$ns" "http://127.0.0.1:8080$health")
    [[ "$code" == "$last" ]] || codes+=("$code")
    last=$code
    if [[ "$code" == 200 ]]; then
      ready=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
      break
    fi
    sleep 0.2
  done
  if [[ " ${codes[*]} " == *" 503 200 " ]]; then
    record "$name" "health 503 while loading, then 200" ok "codes seen: ${codes[*]}; 200 at $ready s"
    ready_seconds[$name]=$ready
  else
    record "$name" "health 503 while loading, then 200" FAIL "codes seen: ${codes[*]}"
  fi
  if [[ "$name" == serve-onnx && -n "$ready" && -n "${ready_seconds[serve]:-}" ]]; then   # issue 66
    # Measured, not checked: start times swing with the machine's load (0.20x to 0.26x of serve's
    # here, the goal at most 0.33x), and a busy CI machine must not fail the images on a timing.
    local ratio
    ratio=$(awk -v a="$ready" -v b="${ready_seconds[serve]}" 'BEGIN {printf "%.2f", a / b}')
    rows+=("$name|start time against serve's (goal: at most 0.33x)|${ratio}x ($ready s against ${ready_seconds[serve]} s)")
    say "$name: start time against serve's: ${ratio}x ($ready s against ${ready_seconds[serve]} s)"
  fi
  local body
  body=$(python3 -c 'import csv, json, sys; print(json.dumps({"instances": [r["text"] for r in csv.DictReader(open(sys.argv[1]))]}))' "$out/texts.csv")
  ip netns exec "$ns" curl -s -X POST -H 'Content-Type: application/json' -d "$body" \
    "http://127.0.0.1:8080$predict" >"$out/answer.json" || true
  if [[ -f "$out/predicted.csv" ]] && compare_predictions "$out/predicted.csv" "$out/answer.json" 2>"$out/compare.err"; then
    record "$name" "predictions equal trainer.predict's" ok
  else
    record "$name" "predictions equal trainer.predict's" FAIL "$(tail -n 1 "$out/compare.err" "$out/predict.err" 2>/dev/null | tail -n 1)"
  fi
  code=$(status "$ns" "http://127.0.0.1:8080$predict" -X POST -H 'Content-Type: application/json' -d '{"instance": ["typo"]}')
  if [[ "$code" == 400 ]]; then record "$name" "bad request: 400" ok; else record "$name" "bad request: 400" FAIL "got $code"; fi
  local pid exit_status=0
  pid=$(container_pid "$server")
  [[ -n "$pid" ]] && kill -TERM "$pid"
  wait "$server" || exit_status=$?
  if [[ -n "$pid" && $exit_status == 0 ]]; then
    record "$name" "SIGTERM: exit 0" ok
  else
    record "$name" "SIGTERM: exit 0" FAIL "exit $exit_status"
  fi
  check_stderr "$name" "$out/server.err"
}

# remove_image NAME: the image and its intermediate layers (the stand-in base stays), unless
# KEEP_IMAGES=1; one image at a time on disk is what the largest needs.
remove_image() {
  [[ "${KEEP_IMAGES:-0}" == 0 ]] || return 0
  bah rmi --force "localhost/vbt-check-$1" >/dev/null 2>&1 || true
  bah rmi --prune >/dev/null 2>&1 || true
}

cleanup() {
  local ns name
  for ns in "${netns_list[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  [[ -n "${driver:-}" ]] || return 0
  bah rm --all >/dev/null 2>&1 || true
  for name in "${images[@]}"; do remove_image "$name"; done
}

table() {
  echo
  echo "| image | size | build | check | result |"
  echo "|---|---|---|---|---|"
  local row image check result shown=""
  for row in "${rows[@]}"; do
    IFS='|' read -r image check result <<<"$row"
    [[ "$check" == build ]] && continue
    if [[ "$shown" == *" $image "* ]]; then
      echo "| | | | $check | $result |"
    else
      shown+=" $image "
      echo "| $image (${dockerfile[$image]}) | ${size[$image]:-} | ${build_seconds[$image]:-?} s | $check | $result |"
    fi
  done
  for row in "${rows[@]}"; do   # an image whose build failed has no other row
    IFS='|' read -r image check result <<<"$row"
    [[ "$check" == build && "$result" != ok* ]] && echo "| $image (${dockerfile[$image]}) | | ${build_seconds[$image]:-?} s | build | $result |"
  done
  return 0
}

# The whole run is one function, read before it starts: editing this file meanwhile is safe.
main() {
  trap cleanup EXIT
  install_tools
  mkdir -p "$dir"
  driver=$(storage_driver)
  work="${dir:?}/work"
  rm -rf "$work"; mkdir -p "$work"
  say "images: ${images[*]}; buildah $(buildah --version | awk '{print $3}'), storage driver $driver, files in $dir"
  make_base
  for name in "${images[@]}"; do
    if room "$name" && build "$name"; then
      check_label "$name"
      case "$name" in
        gpu) check_training gpu; check_replicas gpu ;;
        tpu) check_training tpu ;;
        serve|serve-onnx) check_serving "$name" ;;
      esac
    fi
    remove_image "$name"
  done
  table
  return "$failed"
}

main "$@"; exit
