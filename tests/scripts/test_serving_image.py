"""The serving image and its scripts, as far as a machine without a Docker engine can check them
(hadolint and pins are checked for every image in test_container.py): the entry point, CPU
TensorFlow (or, Dockerfile.serve-onnx, ONNX Runtime without it), the Cloud Build variants,
scripts/deploy.sh."""

import json
import os
import shlex
import subprocess
import sys

import pytest
from google.cloud import aiplatform_v1 as v1
from google.protobuf import json_format
from test_container import ROOT, installed_pin_files, instructions, pins


def script(name, **settings):
    home = os.path.join(os.environ.get("TMPDIR", "/tmp"), "vbt-scripts-home")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": home,
        "PYTHON": sys.executable,
        "NO_GCE_CHECK": "True",
        "CLOUDSDK_CONFIG": os.path.join(home, "gcloud"),
        **settings,
    }
    return subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", name)], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_serving_image_runs_the_server_on_cpu_tensorflow():
    steps = instructions("Dockerfile.serve")
    assert not any(op == "ENV" and "AIP_" in args for op, args in steps), "Vertex sets every AIP_* variable"
    assert json.loads(steps[-1][1]) == ["python", "-m", "trainer.serve", "--host", "0.0.0.0"]
    pinned = pins("Dockerfile.serve")
    assert {pinned[n].rsplit(".", 1)[0] for n in ("tensorflow", "tf-keras", "tensorflow-text")} == {"2.21"}
    assert not any(name.startswith("nvidia-") or "[and-cuda]" in name for name in pinned)


def test_the_onnx_serving_image_runs_the_server_on_onnx_runtime_as_install_sh_onnx_installs_it():
    """No TensorFlow: the ONNX runtime's pins (those of `bash scripts/install.sh onnx`), then the
    package without its dependencies; the same server and contract, --runtime onnx."""
    steps = instructions("Dockerfile.serve-onnx")
    assert next(args for op, args in steps if op == "FROM") == next(
        args for op, args in instructions("Dockerfile.serve") if op == "FROM"
    )
    assert not any(op == "ENV" and "AIP_" in args for op, args in steps), "Vertex sets every AIP_* variable"
    assert json.loads(steps[-1][1]) == ["python", "-m", "trainer.serve", "--host", "0.0.0.0", "--runtime", "onnx"]
    assert installed_pin_files("Dockerfile.serve-onnx") == [("docker/serve-onnx.txt", False)]
    with open(os.path.join(ROOT, "scripts", "install.sh")) as f:
        assert "docker/serve-onnx.txt" in f.read()
    assert any(op == "RUN" and "pip install --no-cache-dir --no-deps /tmp/src" in args for op, args in steps)
    pinned = pins("Dockerfile.serve-onnx")
    assert {"onnxruntime", "tokenizers", "google-cloud-storage"} <= set(pinned)
    assert not set(pinned) & {"tensorflow", "tensorflow-cpu", "tf-keras", "tensorflow-text", "tensorflow-hub"}


@pytest.mark.parametrize(
    "variant, dockerfile", [("serve", "Dockerfile.serve"), ("serve-onnx", "Dockerfile.serve-onnx")]
)
def test_build_image_builds_each_serving_variant_through_cloud_build(variant, dockerfile):
    result = script(
        "build-image.sh", DRY_RUN="1", PROJECT_ID="my-project", REGION="us-central1", VARIANT=variant, TAG="abc1234"
    )
    assert result.returncode == 0, result.stderr
    command, image_line = result.stdout.strip().splitlines()
    words = shlex.split(command)
    substitutions = dict(p.split("=", 1) for p in words[words.index("--substitutions") + 1].split(","))
    assert (substitutions["_DOCKERFILE"], substitutions["_IMAGE"]) == (dockerfile, f"vertex-bert-trainer-{variant}")
    registry = "us-central1-docker.pkg.dev/my-project/vertex-bert-trainer"
    assert image_line == f"IMAGE_URI={registry}/vertex-bert-trainer-{variant}:abc1234"


def test_deploy_script_prints_the_requests_it_would_send():
    result = script(
        "deploy.sh",
        DRY_RUN="1",
        PROJECT_ID="my-project",
        REGION="us-central1",
        JOB_DIR="gs://my-bucket/runs/x",
        IMAGE_URI="img:1",
        MAX_REPLICAS="3",
        ENDPOINT="42",
    )
    assert result.returncode == 0, result.stderr
    requests = json.loads(result.stdout)
    deploy = json_format.ParseDict(requests["deployModel"], v1.DeployModelRequest.pb()())
    assert deploy.endpoint == "projects/my-project/locations/us-central1/endpoints/42"
    assert (
        deploy.deployed_model.dedicated_resources.machine_spec.machine_type,
        deploy.deployed_model.dedicated_resources.max_replica_count,
    ) == ("n1-standard-4", 3)
    assert requests["uploadModel"]["model"]["artifactUri"] == "gs://my-bucket/runs/x/model"


def test_deploy_script_names_every_missing_setting():
    result = script("deploy.sh", DRY_RUN="1", PROJECT_ID="my-project")
    assert result.returncode == 2 and result.stdout == ""
    assert all(name in result.stderr for name in ("REGION", "JOB_DIR", "IMAGE_URI"))
