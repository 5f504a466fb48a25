"""TensorFlow, TF-Text and tf-keras must come from one minor release.

TF-Text's kernels are built against one TensorFlow ABI and tf-keras follows TensorFlow's
release; a mismatch fails later with an undefined-symbol or "Op type not registered" error far
from its cause, so the trainer checks at start-up and says which packages to align.
"""
from importlib import metadata

from trainer.errors import UserError

COUPLED = ("tensorflow", "tensorflow-text", "tf-keras")


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def check_coupled_versions(versions=None) -> None:
    """`versions`: {package: version}; read from the installed packages when not given."""
    if versions is None:
        versions = {}
        for name in COUPLED:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                # TPU VM images ship tensorflow as 'tensorflow-cpu' or 'tensorflow-tpu'.
                for alias in ("tensorflow-cpu", "tensorflow-tpu"):
                    try:
                        versions[name] = metadata.version(alias)
                        break
                    except metadata.PackageNotFoundError:
                        continue
    missing = [name for name in COUPLED if name not in versions]
    if missing:
        raise UserError(f"missing packages: {', '.join(missing)}; install them with "
                        f"`pip install -e .` (they must share TensorFlow's minor version)")
    minors = {name: minor(v) for name, v in versions.items()}
    if len(set(minors.values())) > 1:
        found = ", ".join(f"{name}=={versions[name]}" for name in COUPLED)
        want = minors["tensorflow"]
        raise UserError(f"TensorFlow, TF-Text and tf-keras must share one minor version; found "
                        f"{found}. Install e.g. tensorflow-text~={want}.0 tf-keras~={want}.0.")
