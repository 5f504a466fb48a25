"""Real runs under MirroredStrategy (2 logical CPUs) and MultiWorkerMirroredStrategy (two local
worker processes), each compared with a one-device run of the same seed and global batch.

Mirrored replicas split the one-device batches, so any batch size compares. The workers each
read their own share of the data, in their own order, so their batches differ from one
device's. With a global batch holding the whole training set (WHOLE_TRAINING_SET: one step
per epoch) every step's gradient is that of all rows whatever the order, and the multi-worker
run must end where one device does. The workers are also checked for reading their own shares
and for deciding alike.

For equal results the encoder and head have no dropout (each replica draws its own masks). The
91 training rows leave Mirrored a last batch of 3 that splits 2+1 over the replicas, and give
the workers shares of 30 and 61 rows: only a loss averaged over the global batch
(trainer.modeling.heads.Classifier.compute_loss) trains like one device on either.
Logical devices and thread counts must be set before the TensorFlow runtime starts, hence a
wrapper script around trainer.task.main; it also prints the metrics each process computed.
"""

import csv
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tiny_bert
from conftest import NO_EXTRAS, ROOT, labelled_rows, write_csv

# Five training processes at once: the slow tier, run by hand (docs/testing.md), not in CI.
pytestmark = pytest.mark.slow

WRAPPER = """
import json, os, sys
import trainer
import tensorflow as tf
from trainer import task
from trainer.training import run as train

devices = int(os.environ.get("LOGICAL_CPUS", "1"))
if devices > 1:
    cpu, = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
run = train.run

def run_and_print(config, environ, **kwargs):
    metrics = run(config, environ, **kwargs)
    print("METRICS " + json.dumps(metrics))
    return metrics

train.run = run_and_print
sys.exit(task.main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def setup(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("multidevice")
    encoder = tiny_bert.write_hf_checkpoint(
        root / "encoder", config={**tiny_bert.CONFIG, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    )
    (root / "wrapper.py").write_text(WRAPPER)
    # Two training files: the token cache keeps them in separate blocks, one per worker.
    rows = labelled_rows(91, 1)
    write_csv(root / "train-0.csv", rows[:30]), write_csv(root / "train-1.csv", rows[30:])
    data = {**tiny_data, "train": str(root / "train-*.csv")}
    return root, encoder, data


# One step per epoch of all 91 rows: 64 rows per worker's batch hold either share (30 and 61
# rows; a worker repeats or cuts its share to the common number of steps, so a share larger than
# its batch would lose rows), and a loss averaged per worker would weigh their rows 2:1. Six
# steps, every embedding trained, and the best epoch by validation loss, so the exported weights
# are those of the last steps, not of the first.
WHOLE_TRAINING_SET = [
    "--batch-size",
    "128",
    "--sequence-padding",
    "fixed",
    "--epochs",
    "6",
    "--learning-rate",
    "3e-2",
    "--train-word-embeddings",
    "--selection-metric",
    "val_loss",
    "--early-stopping-patience",
    "0",
]


def args(encoder, data, job_dir):
    return [
        "--encoder",
        encoder,
        "--training-file",
        data["train"],
        "--validation-file",
        data["validation"],
        "--testing-file",
        data["test"],
        "--job-dir",
        job_dir,
        "--epochs",
        "3",
        "--batch-size",
        "8",
        "--learning-rate",
        "1e-2",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
        "--dropout",
        "0",
        "--early-stopping-patience",
        "1",
        *NO_EXTRAS,
    ]


def start(root, arguments, **env):
    """The wrapper in a process of its own, importing this checkout's trainer (a script's own
    directory, not the working directory, leads its sys.path)."""
    environ = {
        **os.environ,
        "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"),
        "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
        **env,
    }
    return subprocess.Popen(
        [sys.executable, str(root / "wrapper.py"), *map(str, arguments)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environ,
    )


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture(scope="module")
def runs(setup):
    """All runs at once: the two workers use one thread each, so the five processes share the
    cores without starving each other."""
    root, encoder, data = setup
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = {
        "single": start(root, args(encoder, data, root / "single")),
        "mirrored": start(
            root, args(encoder, data, root / "mirrored") + ["--distribution", "mirrored"], LOGICAL_CPUS="2"
        ),
        "single-whole": start(root, args(encoder, data, root / "single-whole") + WHOLE_TRAINING_SET),
    }
    for index in range(2):
        (root / f"tmp-worker-{index}").mkdir()
        processes[f"worker-{index}"] = start(
            root,
            args(encoder, data, root / "multiworker") + WHOLE_TRAINING_SET,
            TF_CONFIG=json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}),
            TMPDIR=str(root / f"tmp-worker-{index}"),
            TF_NUM_INTRAOP_THREADS="1",
            TF_NUM_INTEROP_THREADS="1",
        )
    try:
        outputs = {name: process.communicate(timeout=300)[0] for name, process in processes.items()}
    finally:
        for process in processes.values():  # a worker whose peer died waits for it forever
            process.kill()
    for name, process in processes.items():
        assert process.returncode == 0, f"{name}:\n{outputs[name][-3000:]}"
    printed = {
        name: json.loads(next(line for line in out.splitlines() if line.startswith("METRICS "))[len("METRICS ") :])
        for name, out in outputs.items()
    }
    return {"root": root, "data": data, "outputs": outputs, "metrics": printed}


def assert_same_results(got, expected):
    for split in ("train", "validation", "test"):
        assert got[split]["loss"] == pytest.approx(expected[split]["loss"], rel=1e-4), split
        assert got[split]["confusion_matrix"] == expected[split]["confusion_matrix"], split
    assert (got["best_epoch"], got["epochs_completed"], got["stopped_early"]) == (
        expected["best_epoch"],
        expected["epochs_completed"],
        expected["stopped_early"],
    )


def history(job_dir):
    with open(job_dir / "eval_history.csv") as f:
        return [{k: float(v) for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


def serve(model_dir, data):
    from trainer.serving import export

    with open(data["test"]) as f:
        texts = np.array([row["text"] for row in csv.DictReader(f)], dtype=object)
    return export.load(str(model_dir))(text=texts)["probabilities"].numpy()


# --- MirroredStrategy over two logical CPUs ------------------------------------------------------


def test_mirrored_trains_on_two_replicas(runs):
    device = json.loads((runs["root"] / "mirrored" / "metrics.json").read_text())["device"]
    assert (device["strategy"], device["replicas"], len(device["devices"])) == ("mirrored", 2, 2)


def test_mirrored_metrics_equal_one_device(runs):
    metrics = json.loads((runs["root"] / "mirrored" / "metrics.json").read_text())
    assert_same_results(metrics, runs["metrics"]["single"])


def test_mirrored_history_equals_one_device(runs):
    for got, expected in zip(history(runs["root"] / "mirrored"), history(runs["root"] / "single"), strict=True):
        assert got == pytest.approx(expected, rel=1e-4, abs=1e-6), got["epoch"]


def test_mirrored_export_serves_raw_strings_like_one_device(runs):
    np.testing.assert_allclose(
        serve(runs["root"] / "mirrored" / "model", runs["data"]),
        serve(runs["root"] / "single" / "model", runs["data"]),
        atol=1e-4,
    )


# --- MultiWorkerMirroredStrategy over two local processes ----------------------------------------


def test_multiworker_trains_each_worker_on_its_own_share(runs):
    metrics = json.loads((runs["root"] / "multiworker" / "metrics.json").read_text())
    assert metrics["device"]["strategy"] == "multiworker" and metrics["device"]["replicas"] == 2
    for index in range(2):
        assert (
            f"worker input: share {index + 1} of 2 of the training data (1 of the 2 "
            f"token-cache blocks)" in runs["outputs"][f"worker-{index}"]
        )
    assert (
        "token cache: waiting for the chief" in runs["outputs"]["worker-1"]
        or "token cache: reusing" in runs["outputs"]["worker-1"]
    )


def test_every_worker_evaluates_every_example_and_decides_alike(runs):
    # Each worker predicts its shard; Classifier.predict_step returns labels and weights with
    # the logits, so the gathered predictions give every worker the metrics of the whole split,
    # and with them the same best epoch and early-stopping decisions.
    chief, worker = runs["metrics"]["worker-0"], runs["metrics"]["worker-1"]
    for key in ("train", "validation", "test", "best_epoch", "epochs_completed", "stopped_early"):
        assert worker[key] == chief[key], key
    assert np.array(chief["test"]["confusion_matrix"]).sum() == chief["dataset_sizes"]["test"]


def test_only_the_chief_writes_the_job_dir(runs):
    job_dir = runs["root"] / "multiworker"
    assert {p.name for p in job_dir.iterdir()} == {p.name for p in (runs["root"] / "single").iterdir()}
    log = (job_dir / "training.log").read_text()
    assert "worker role: worker 0 (chief)" in log and "worker role: worker 1" not in log
    for events in (job_dir / "tensorboard").iterdir():  # one event file: the chief's
        assert len(list(events.iterdir())) == 1, events


def test_the_other_worker_exports_to_its_own_scratch_directory(runs):
    exported = next(line for line in runs["outputs"]["worker-1"].splitlines() if "exported the model" in line)
    assert str(runs["root"] / "tmp-worker-1") in exported


def test_the_other_worker_removes_its_temporary_directories(runs):
    assert list((runs["root"] / "tmp-worker-1").iterdir()) == []


def test_multiworker_metrics_equal_one_device_at_the_same_global_batch(runs):
    assert_same_results(runs["metrics"]["worker-0"], runs["metrics"]["single-whole"])


def test_multiworker_export_serves_raw_strings_like_one_device(runs):
    np.testing.assert_allclose(
        serve(runs["root"] / "multiworker" / "model", runs["data"]),
        serve(runs["root"] / "single-whole" / "model", runs["data"]),
        atol=1e-4,
    )
