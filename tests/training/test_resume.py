"""Spot preemption: a run killed with SIGKILL after its 2nd epoch checkpoint, as a preempted Spot
VM ends it, rerun with the same command, ends exactly like an uninterrupted run with the same
seed. On Vertex the rerun is the replica Vertex restarts (a Spot or flex-start job asks for it:
trainer.cloud.scheduling), with the same arguments and job id.

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
from conftest import labelled_rows, without_extras, write_csv
from test_task import run_cli

SWAPPED = {"positive": "negative", "negative": "positive", "neutral": "neutral"}


@pytest.fixture(scope="module")
def data(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("resume_data")
    return {
        "train": write_csv(root / "train.csv", labelled_rows(600, 1)),
        "validation": write_csv(
            root / "validation.csv", [(text, SWAPPED[label]) for text, label in labelled_rows(30, 2)]
        ),
        "test": tiny_data["test"],
    }


def args(tiny_encoder_dir, data, job_dir):
    return [
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        data["train"],
        "--validation-file",
        data["validation"],
        "--testing-file",
        data["test"],
        "--job-dir",
        job_dir,
        "--epochs",
        "6",
        "--early-stopping-patience",
        "3",
        "--hypertune-metric",
        "val_loss",
        "--batch-size",
        "8",
        "--learning-rate",
        "1e-2",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
        "--keep-checkpoints",
        "best",
        "--train-word-embeddings",
    ]  # the tiny encoder's embeddings are random: they must learn


def start(arguments, env=None):
    env = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "trainer.task", *without_extras("trainer.task", arguments)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


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


# --- Spot preemption on Vertex: the replica restarts with the same arguments, --overwrite included


@pytest.fixture(scope="module")
def vertex_restart(tiny_encoder_dir, data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("vertex") / "job"
    arguments = [*args(tiny_encoder_dir, data, job_dir), "--overwrite"]
    vertex = {"CLOUD_ML_JOB_ID": "1234567890"}
    kill_after_second_epoch(arguments, job_dir, vertex)
    restarted = run_cli(*arguments, env=vertex)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    return job_dir, restarted


@pytest.mark.slow
def test_a_vertex_replica_restarted_after_spot_preemption_resumes_despite_overwrite(vertex_restart):
    job_dir, restarted = vertex_restart
    assert "resumed after epoch 2 from" in restarted.stdout
    assert [row["epoch"] for row in history(job_dir)] == [1, 2, 3, 4]


@pytest.mark.slow
def test_a_vertex_replica_restarted_after_spot_preemption_ends_like_an_uninterrupted_run(vertex_restart, runs):
    job_dir, _ = vertex_restart
    assert metrics(job_dir)["test"]["loss"] == pytest.approx(metrics(runs["uninterrupted"])["test"]["loss"], rel=1e-5)


def history(job_dir):
    with open(job_dir / "eval_history.csv") as f:
        return [{k: float(v) for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


def metrics(job_dir):
    return json.loads((job_dir / "metrics.json").read_text())


@pytest.mark.slow  # the killed and uninterrupted runs (about 60 s): CI's 2.21 slow line runs them
def test_a_spot_preempted_run_rerun_resumes_after_the_second_epoch(runs):
    assert "resumed after epoch 2 from" in runs["rerun"].stdout


@pytest.mark.slow  # the killed and uninterrupted runs (about 60 s): CI's 2.21 slow line runs them
def test_a_spot_preempted_runs_history_has_each_epoch_once_in_order(runs):
    assert [row["epoch"] for row in history(runs["resumed"])] == [1, 2, 3, 4]


@pytest.mark.slow  # the killed and uninterrupted runs (about 60 s): CI's 2.21 slow line runs them
def test_epochs_after_a_spot_preemption_train_like_the_uninterrupted_run(runs):
    # Train loss after the resume depends on the restored weights, optimizer moments, learning-
    # rate step, batch order and dropout generator state: any one missing shows here.
    resumed, uninterrupted = history(runs["resumed"]), history(runs["uninterrupted"])
    for got, expected in zip(resumed, uninterrupted, strict=True):
        assert got == pytest.approx(expected, rel=1e-5, abs=1e-7), got["epoch"]


@pytest.mark.slow  # the killed and uninterrupted runs (about 60 s): CI's 2.21 slow line runs them
def test_early_stopping_keeps_its_best_epoch_across_a_spot_preemption(runs):
    resumed, uninterrupted = metrics(runs["resumed"]), metrics(runs["uninterrupted"])
    assert (
        (resumed["best_epoch"], resumed["stopped_early"], resumed["epochs_completed"])
        == (uninterrupted["best_epoch"], uninterrupted["stopped_early"], uninterrupted["epochs_completed"])
        == (1, True, 4)
    )


@pytest.mark.slow  # the killed and uninterrupted runs (about 60 s): CI's 2.21 slow line runs them
def test_a_spot_preempted_runs_final_metrics_equal_the_uninterrupted_runs(runs):
    resumed, uninterrupted = metrics(runs["resumed"]), metrics(runs["uninterrupted"])
    for split in ("train", "validation", "test"):
        assert resumed[split]["loss"] == pytest.approx(uninterrupted[split]["loss"], rel=1e-5)
        assert resumed[split]["confusion_matrix"] == uninterrupted[split]["confusion_matrix"]


@pytest.mark.slow  # the killed and uninterrupted runs (about 60 s): CI's 2.21 slow line runs them
def test_a_spot_preempted_run_evaluates_the_best_epochs_weights(runs):
    best = history(runs["resumed"])[0]
    assert metrics(runs["resumed"])["validation"]["loss"] == pytest.approx(best["val_loss"], rel=1e-5)


@pytest.mark.slow  # the killed and uninterrupted runs (about 60 s): CI's 2.21 slow line runs them
def test_a_spot_preempted_runs_export_equals_the_uninterrupted_runs(runs, data):
    from trainer.serving import export

    with open(data["test"]) as f:
        texts = np.array([row["text"] for row in csv.DictReader(f)], dtype=object)
    resumed = export.load(str(runs["resumed"] / "model"))(text=texts)["probabilities"].numpy()
    uninterrupted = export.load(str(runs["uninterrupted"] / "model"))(text=texts)["probabilities"]
    np.testing.assert_allclose(resumed, uninterrupted.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # the killed and uninterrupted runs (about 60 s): CI's 2.21 slow line runs them
def test_a_spot_preempted_run_keeps_only_the_best_epochs_weights(runs):
    assert sorted(os.listdir(runs["resumed"] / "checkpoints" / "best")) == ["epoch-1"]


# --- best weights across restarts, without a run -------------------------------------------------


def best_weights(directory, rows=(), **kwargs):
    import tf_keras

    from trainer.training import callbacks

    best = callbacks.BestWeights(str(directory), "val_loss", 2, list(rows), **kwargs)
    best.set_model(tf_keras.Sequential([tf_keras.Input((2,)), tf_keras.layers.Dense(1)]))
    return best


def test_a_beaten_best_is_deleted_only_after_the_next_resume_checkpoint(tmp_path):
    best = best_weights(tmp_path)
    best.on_epoch_end(0, {"val_loss": 1.0})
    best.prune()
    best.on_epoch_end(1, {"val_loss": 0.5})
    assert sorted(os.listdir(tmp_path)) == ["epoch-1", "epoch-2"]  # a kill now resumes at best 1
    best.prune()
    assert os.listdir(tmp_path) == ["epoch-2"]


def test_a_best_from_before_the_restart_is_read_from_the_chiefs_directory(tmp_path):
    rows = [{"epoch": 1, "val_loss": 0.5}, {"epoch": 2, "val_loss": 0.7}]
    best = best_weights(tmp_path / "scratch", rows, shared_directory=str(tmp_path / "chief"))
    assert best.weights_prefix == str(tmp_path / "chief" / "epoch-1" / "weights")
    best.on_epoch_end(2, {"val_loss": 0.4})
    assert best.weights_prefix == str(tmp_path / "scratch" / "epoch-3" / "weights")


def test_epochs_waited_before_the_restart_count_towards_patience(tmp_path):
    best = best_weights(tmp_path, [{"epoch": 1, "val_loss": 0.5}, {"epoch": 2, "val_loss": 0.7}])
    best.on_epoch_end(2, {"val_loss": 0.6})
    assert best.model.stop_training and (best.best_epoch, best.best) == (1, 0.5)


@pytest.fixture(scope="module")
def terminated(tiny_encoder_dir, data, tmp_path_factory):
    """A run sent SIGTERM, as Vertex preempts a job, after its 2nd epoch checkpoint."""
    job_dir = tmp_path_factory.mktemp("terminated") / "job"
    process = start(args(tiny_encoder_dir, data, job_dir))
    try:
        wait_for_checkpoint(process, job_dir / "checkpoints" / "resume", 2)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=60)
        return job_dir, process.returncode, out, time.monotonic() - sent
    finally:
        process.kill()


@pytest.mark.slow  # terminated: a run of its own (CI's slow line; test_signal_deadline.py is the fast check)
def test_sigterm_ends_a_run_with_one_line_and_exit_143(terminated):
    """Issue #49, 9: it exited 143 with no log line and left job.lock behind."""
    job_dir, code, out, seconds = terminated
    assert code == 143 and seconds < 30
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(
        "error: terminated (SIGTERM); rerun the same command to resume after the last completed epoch"
    )
    assert "Traceback" not in out
    assert errors[0] in (job_dir / "training.log").read_text()


@pytest.mark.slow  # terminated: a run of its own (CI's slow line; test_signal_deadline.py is the fast check)
def test_sigterm_releases_the_lock_and_keeps_the_last_checkpoint(terminated):
    job_dir = terminated[0]
    assert not (job_dir / "job.lock").exists()
    assert (job_dir / "checkpoints" / "resume" / "checkpoint").exists()
    assert not (job_dir / "metrics.json").exists()
