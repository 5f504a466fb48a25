"""Kill-and-resume: a run killed with SIGKILL after its 2nd epoch checkpoint, rerun with the same
command, ends exactly like an uninterrupted run with the same seed.

The validation split swaps positive and negative, so validation loss is lowest after epoch 1 and
rises from then on: the best epoch comes before the kill, and early stopping (patience 3) fires
after the resume, at epoch 4 of 6. 600 training rows make an epoch last about a second: long
enough to kill the run between its 2nd and 3rd checkpoints.
"""
import csv
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import labelled_rows, write_csv
from test_task import run_cli

SWAPPED = {"positive": "negative", "negative": "positive", "neutral": "neutral"}


@pytest.fixture(scope="module")
def data(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("resume_data")
    return {"train": write_csv(root / "train.csv", labelled_rows(600, 1)),
            "validation": write_csv(root / "validation.csv",
                                    [(text, SWAPPED[label]) for text, label in labelled_rows(30, 2)]),
            "test": tiny_data["test"]}


def args(tiny_encoder_dir, data, job_dir):
    return ["--encoder", tiny_encoder_dir, "--training-file", data["train"],
            "--validation-file", data["validation"], "--testing-file", data["test"],
            "--job-dir", job_dir, "--epochs", "6", "--early-stopping-patience", "3",
            "--hypertune-metric", "val_loss", "--batch-size", "8", "--learning-rate", "1e-2",
            "--max-seq-length", "16", "--mixed-precision", "off",
            "--train-word-embeddings"]  # the tiny encoder's embeddings are random: they must learn


def start(arguments, env=None):
    env = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"),
           **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "trainer.task", *map(str, arguments)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def wait_for_checkpoint(process, resume_dir, number, timeout=240):
    """Polls the CheckpointManager's state file rather than ckpt-N.index: the index is complete
    a moment before the state file names it, and a kill in between resumes from ckpt-(N-1)."""
    state = resume_dir / "checkpoint"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if state.exists() and f'model_checkpoint_path: "ckpt-{number}"' in state.read_text():
            return
        time.sleep(0.01)
    process.kill()
    raise AssertionError(f"no ckpt-{number} before exit/timeout:\n{process.communicate()[0]}")


@pytest.fixture(scope="module")
def runs(tiny_encoder_dir, data, tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    uninterrupted = start(args(tiny_encoder_dir, data, root / "uninterrupted"))
    killed = start(args(tiny_encoder_dir, data, root / "killed"))
    try:
        wait_for_checkpoint(killed, root / "killed" / "checkpoints" / "resume", 2)
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=60)
        assert not (root / "killed" / "metrics.json").exists()
        rerun = run_cli(*args(tiny_encoder_dir, data, root / "killed"))
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        out, _ = uninterrupted.communicate(timeout=300)
        assert uninterrupted.returncode == 0, out
    finally:
        uninterrupted.kill()
        killed.kill()
    return {"uninterrupted": root / "uninterrupted", "resumed": root / "killed", "rerun": rerun}


def kill_after_second_epoch(arguments, job_dir, env=None):
    process = start(arguments, env)
    try:
        wait_for_checkpoint(process, job_dir / "checkpoints" / "resume", 2)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
    finally:
        process.kill()


# --- Vertex restarts a preempted replica with the same arguments, --overwrite included ---------

@pytest.fixture(scope="module")
def vertex_restart(tiny_encoder_dir, data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("vertex") / "job"
    arguments = [*args(tiny_encoder_dir, data, job_dir), "--overwrite"]
    vertex = {"CLOUD_ML_JOB_ID": "1234567890"}
    kill_after_second_epoch(arguments, job_dir, vertex)
    restarted = run_cli(*arguments, env=vertex)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    return job_dir, restarted


def test_a_restarted_vertex_replica_resumes_despite_overwrite(vertex_restart):
    job_dir, restarted = vertex_restart
    assert "resumed after epoch 2 from" in restarted.stdout
    assert [row["epoch"] for row in history(job_dir)] == [1, 2, 3, 4]


def test_the_restarted_replica_ends_like_an_uninterrupted_run(vertex_restart, runs):
    job_dir, _ = vertex_restart
    assert metrics(job_dir)["test"]["loss"] == pytest.approx(metrics(runs["uninterrupted"])["test"]["loss"], rel=1e-5)


def test_ctrl_c_before_the_first_epoch_says_a_rerun_starts_over(tiny_encoder_dir, data, tmp_path):
    process = start(args(tiny_encoder_dir, data, tmp_path / "job"))
    try:
        for line in process.stdout:
            if "steps per epoch" in line:  # about to train; no checkpoint yet
                process.send_signal(signal.SIGINT)
                break
        output = process.communicate(timeout=120)[0]
    finally:
        process.kill()
    assert process.returncode == 130, output
    assert "interrupted before the first epoch finished; rerunning the same command starts over" in output
    assert "Traceback" not in output
    rerun = run_cli(*args(tiny_encoder_dir, data, tmp_path / "job"))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "the unfinished run completed no epoch: starting at epoch 1" in rerun.stdout
    assert "resumed" not in rerun.stdout
