"""Benchmark (issue 66): `trainer.serve` with uvicorn's uvloop event loop and httptools parser
against the standard library's asyncio loop and h11, which uvicorn falls back to without them:
the same model, texts and copies, in one run.

    python bench/server_loop.py [--model-dir DIR] [--texts 800] [--rounds 2] [--publish]

Needs uvloop and httptools installed (`pip install uvloop httptools`). The fallback is forced by
a directory put on the server's PYTHONPATH whose `uvloop` and `httptools` packages raise
ImportError, as a Python without them does: uvicorn's loop="auto" and http="auto" then pick
asyncio and h11. Each copy (the TensorFlow float32 SavedModel and, where the model dir holds
it, the ONNX int8 copy) is served at 1, 4 and 16 clients, one text per request, with and
without, in ABBA order over --rounds; the table gives the median examples/s. Without
--model-dir, a dry run of the default encoder (its ONNX copies included) is trained once into
bench/work/server_loop/ and reused. Traffic goes to 127.0.0.1 only. Nothing else should run
meanwhile.
"""

import argparse
import csv
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile

from common import ROOT, WORK, add_publish_flag, kept_here, log, machine, printed, publish, table
from server_load import copy_flags, serve_rates

SST2_DEV = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "sst2", "dev.tsv"))
CLIENTS = (1, 4, 16)
VARIANTS = ("uvloop", "asyncio")  # with uvloop and httptools; with asyncio and h11


def model_dir(args) -> str:
    if args.model_dir:
        return args.model_dir
    job = os.path.join(WORK, "server_loop", "job")
    kept_here(job)
    if not os.path.exists(os.path.join(job, "metrics.json")):
        log("a dry run of the default encoder, its ONNX copies included")
        subprocess.run([sys.executable, "-m", "trainer.task", "--dry-run", "--job-dir", job], check=True)
    return os.path.join(job, "model")


def without_uvloop(directory: str) -> str:
    """A directory whose uvloop and httptools packages raise ImportError."""
    for name in ("uvloop", "httptools"):
        os.makedirs(os.path.join(directory, name), exist_ok=True)
        with open(os.path.join(directory, name, "__init__.py"), "w") as f:
            f.write(f"raise ImportError('{name}: left out by bench/server_loop.py')\n")
    return directory


def rates(model: str, work: str, texts: list, copy: str, variant: str, blocked: str) -> dict:
    """{clients: examples/s} of one server of `copy` with `variant`."""
    saved = os.environ.get("PYTHONPATH")
    if variant == "asyncio":
        os.environ["PYTHONPATH"] = blocked + (os.pathsep + saved if saved else "")
    try:
        flags = [*copy_flags(copy), "--no-access-log"]
        measured = serve_rates(model, work, texts, precision=copy, clients=CLIENTS, flags=flags)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return {clients: figures["examples_per_second"] for clients, figures in measured.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", help="a model dir of trainer.task (default: a dry run's, trained once)")
    parser.add_argument("--texts", type=int, default=800, help="SST-2 dev texts sent, one per request")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds of both variants per copy")
    add_publish_flag(parser)
    args = parser.parse_args(argv)
    missing = [name for name in ("uvloop", "httptools") if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(f"error: {' and '.join(missing)} not installed: pip install uvloop httptools")
    model = model_dir(args)
    with open(SST2_DEV, newline="", encoding="utf-8") as f:
        texts = [row["sentence"] for _, row in zip(range(args.texts), csv.DictReader(f, delimiter="\t"))]
    copies = ["float32"] + (["onnx-int8"] if os.path.isdir(os.path.join(model, "onnx-int8")) else [])
    work = os.path.join(WORK, "server_loop", "logs")
    os.makedirs(work, exist_ok=True)
    runs = {(copy, variant): [] for copy in copies for variant in VARIANTS}
    with tempfile.TemporaryDirectory() as blocked_dir:
        blocked = without_uvloop(blocked_dir)
        for round_ in range(args.rounds):
            for copy in copies:
                for variant in VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]:
                    log(f"round {round_ + 1}: {copy} with {variant}")
                    runs[copy, variant].append(rates(model, work, texts, copy, variant, blocked))
    median = {
        key: {clients: statistics.median(run[clients] for run in found) for clients in CLIENTS}
        for key, found in runs.items()
    }
    rows = [
        [
            copy,
            str(clients),
            f"{median[copy, 'asyncio'][clients]:.1f}",
            f"{median[copy, 'uvloop'][clients]:.1f}",
            f"{median[copy, 'uvloop'][clients] / median[copy, 'asyncio'][clients]:.2f}x",
        ]
        for copy in copies
        for clients in CLIENTS
    ]
    info = machine()
    with printed() as text:
        print(
            f"\nbench/server_loop.py: {info['cpus']} CPUs ({info['cpu']}, native {info['native']}); "
            f"{len(texts)} SST-2 dev texts, one per request; median of {args.rounds} rounds"
        )
        print(table(rows, ["copy", "clients", "asyncio+h11 ex/s", "uvloop+httptools ex/s", "gain"]))
        if "onnx-int8" in copies:
            for variant in ("asyncio", "uvloop"):
                share = median["onnx-int8", variant][16] / median["float32", variant][16]
                print(f"onnx-int8 against float32 at 16 clients, both with {variant}: {share:.2f}x")
    if args.publish:
        result = {"rounds": {f"{c}/{v}": found for (c, v), found in runs.items()}, "machine": info}
        publish("server_loop", result, text.getvalue())


if __name__ == "__main__":
    main()
