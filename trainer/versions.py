"""TensorFlow, TF-Text and tf-keras must come from one minor release.

TF-Text's kernels are built against one TensorFlow ABI and tf-keras follows TensorFlow's
release; a mismatch fails later with an undefined-symbol or "Op type not registered" error far
from its cause, so the trainer checks at start-up and says which packages to align.
"""

from importlib import metadata

from trainer.errors import UserError

COUPLED = ("tensorflow", "tensorflow-text", "tf-keras")
# Distributions that install the top-level `tensorflow` package: the CPU/GPU build, the CPU-only
# build, and the TPU build (the TPU image's; PyPI's tensorflow-tpu).
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-tpu")


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def installed_versions(names) -> dict:
    """{name: version} of the distributions among `names` that are installed."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def tensorflow_version() -> dict:
    """{distribution: version} of the one TensorFlow build installed; {} when there is none.

    Two of them write into the same `tensorflow/` directory, and which one's files won is
    unknown: tf-keras or tensorflow-text installed with their dependencies next to
    tensorflow-tpu do exactly that (they require `tensorflow` by name).
    """
    found = installed_versions(TENSORFLOW_DISTRIBUTIONS)
    if len(found) > 1:
        listed = ", ".join(f"{name}=={version}" for name, version in found.items())
        raise UserError(
            f"more than one TensorFlow build is installed ({listed}); they overwrite each "
            f"other's files: uninstall all of them, then install one"
        )
    return found


def check_coupled_versions(versions=None) -> None:
    """`versions`: {package: version}; read from the installed packages when not given."""
    if versions is None:
        versions = installed_versions(COUPLED[1:])
        versions.update(zip(["tensorflow"], tensorflow_version().values()))
    missing = [name for name in COUPLED if name not in versions]
    if missing:
        raise UserError(
            f"missing packages: {', '.join(missing)}; install them with "
            f"`pip install -e .` (they must share TensorFlow's minor version)"
        )
    minors = {name: minor(v) for name, v in versions.items()}
    if len(set(minors.values())) > 1:
        found = ", ".join(f"{name}=={versions[name]}" for name in COUPLED)
        want = minors["tensorflow"]
        raise UserError(
            f"TensorFlow, TF-Text and tf-keras must share one minor version; found "
            f"{found}. Install e.g. tensorflow-text~={want}.0 tf-keras~={want}.0."
        )


def unmet_requirements(distribution: str = "vertex-bert-trainer") -> list:
    """The requirements of installed `distribution` that the environment does not meet.

    `pip check` cannot judge the TPU image: tf-keras and tensorflow-text require `tensorflow` by
    name, which tensorflow-tpu provides under another name. Here any TensorFlow build counts.
    """
    from packaging.requirements import Requirement

    tensorflow = tensorflow_version()
    unmet = []
    for line in metadata.requires(distribution) or []:
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = requirement.name.lower()
        found = dict(zip(["tensorflow"], tensorflow.values())) if name == "tensorflow" else installed_versions([name])
        if name not in found or not requirement.specifier.contains(found[name], prereleases=True):
            unmet.append(f"{line} (installed: {found.get(name, 'none')})")
    return unmet


def main(argv) -> int:
    """`python -m trainer.versions [EXPECTED_TENSORFLOW_BUILD]`: the image build's last check.

    Prints the TensorFlow build; fails unless it is the expected one (e.g. tensorflow-tpu), the
    coupled packages share its minor version and every requirement of the trainer is met.
    """
    found = tensorflow_version()
    check_coupled_versions()
    unmet = unmet_requirements()
    if unmet:
        raise UserError("unmet requirements of vertex-bert-trainer: " + "; ".join(unmet))
    build = ", ".join(f"{name}=={version}" for name, version in found.items())
    if argv and list(found) != argv[:1]:
        raise UserError(f"expected the TensorFlow build {argv[0]}, found {build}")
    print(build)
    return 0


if __name__ == "__main__":
    import sys

    from trainer import cli

    sys.exit(cli.run(main))
