"""The training controls Trainer/Keras users expect (issue #23): --max-steps and
--log-every-steps, each on a tiny Keras model in process, plus one short real run that uses both."""
import json

import numpy as np
import pytest

from trainer import config as config_lib
from trainer.errors import UserError


def tiny_model():
    import tf_keras
    model = tf_keras.Sequential([tf_keras.Input((2,)), tf_keras.layers.Dense(1)])
    model.compile(optimizer=tf_keras.optimizers.SGD(0.01), loss="mse")
    return model


def batches(count=100):
    import tensorflow as tf
    x = np.arange(count * 2, dtype=np.float32).reshape(count, 2) / (2 * count)
    return tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(4).repeat()


# --- --max-steps ---------------------------------------------------------------------------------

def test_max_steps_stops_the_optimizer_at_exactly_that_step_inside_an_epoch():
    import tf_keras
    from trainer.training import callbacks
    model, history = tiny_model(), tf_keras.callbacks.History()
    model.fit(batches(), epochs=3, steps_per_epoch=5, verbose=0,
              callbacks=[callbacks.StepLimit(7), history])
    assert int(model.optimizer.iterations.numpy()) == 7
    assert history.epoch == [0, 1]  # the second epoch ended at step 7 and was recorded


@pytest.mark.parametrize("steps_per_epoch, epochs, max_steps, expected", [
    (12, 3, 0, (3, 36)),   # --epochs decides
    (12, 3, 17, (2, 17)),  # overrides --epochs: the second epoch stops at step 17
    (12, 3, 24, (2, 24)),
    (12, 1, 100, (9, 100)),
])
def test_max_steps_decides_the_epochs_and_the_schedules_length(steps_per_epoch, epochs, max_steps, expected):
    from trainer.training import stages
    assert stages.training_length(steps_per_epoch, epochs, max_steps) == expected


def test_max_steps_must_be_a_multiple_of_steps_per_execution():
    with pytest.raises(UserError, match="--max-steps: must be a multiple of --steps-per-execution 4"):
        config_lib.build_config(["--max-steps", "10", "--steps-per-execution", "4"], {})
    assert config_lib.build_config(["--max-steps", "12", "--steps-per-execution", "4"], {}).train.max_steps == 12


# --- --log-every-steps ----------------------------------------------------------------------------

def scalars(directory):
    """{tag: [(step, value), ...]} of the TensorBoard event files in `directory`."""
    import glob

    import tensorflow as tf
    found = {}
    for path in sorted(glob.glob(f"{directory}/events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                found.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return found


def test_step_scalars_draw_loss_learning_rate_and_throughput_every_n_steps(tmp_path):
    from trainer.training import callbacks
    model = tiny_model()
    model.fit(batches(), epochs=2, steps_per_epoch=5, verbose=0,
              callbacks=[callbacks.StepScalars(str(tmp_path), every=3, batch_size=4)])
    written = scalars(tmp_path / "steps")
    assert set(written) == {"loss", "learning_rate", "examples_per_second"}
    for tag, points in written.items():
        assert [step for step, _ in points] == [3, 6, 9], tag
    assert all(value == pytest.approx(0.01) for _, value in written["learning_rate"])
    assert all(value > 0 for _, value in written["examples_per_second"])


def test_log_every_steps_must_not_be_negative():
    with pytest.raises(UserError, match="--log-every-steps: must be >= 0"):
        config_lib.build_config(["--log-every-steps", "-1"], {})


# --- a short real run with both ------------------------------------------------------------------

@pytest.fixture(scope="module")
def stepped_run(tiny_encoder_dir, tiny_data, tmp_path_factory):
    from test_task import run_cli, train_args
    job_dir = tmp_path_factory.mktemp("steps") / "job"
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, job_dir, "--max-steps", "17",
                                 "--log-every-steps", "5"))
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir


def test_a_run_with_max_steps_takes_exactly_that_many_steps_and_decays_to_zero_there(stepped_run):
    from conftest import metrics_of, read_csv
    metrics = metrics_of(stepped_run)
    assert metrics["train_steps"] == 17 and metrics["hyperparameters"]["max_steps"] == 17
    history = read_csv(stepped_run / "eval_history.csv")
    assert 2 <= len(history) < 6  # not --epochs 6
    # The schedule ends at step 17: the last step's rate is 1/16 of the peak (1e-2), one step of
    # the 16 after the one-step warm-up before zero.
    assert float(history[-1]["learning_rate"]) == pytest.approx(1e-2 / 16, rel=1e-4)


def test_a_run_writes_step_scalars_to_tensorboard(stepped_run):
    written = scalars(stepped_run / "tensorboard" / "steps")
    assert [step for step, _ in written["loss"]] == [5, 10, 15]


# --- --eval-every-steps, killed and resumed ------------------------------------------------------

def span_args(tiny_encoder_dir, data, job_dir):
    """600 rows in batches of 8: 75 steps an epoch, 150 in 2 epochs, evaluated every 30: five
    evaluations, the 2nd at step 60 in the middle of the first epoch, the 3rd across its end."""
    return ["--encoder", tiny_encoder_dir, "--training-file", data["train"],
            "--validation-file", data["validation"], "--job-dir", job_dir, "--epochs", "2",
            "--eval-every-steps", "30", "--batch-size", "8", "--learning-rate", "1e-2",
            "--max-seq-length", "16", "--mixed-precision", "off", "--train-word-embeddings"]


@pytest.fixture(scope="module")
def span_runs(tiny_encoder_dir, tiny_data, tmp_path_factory):
    from conftest import labelled_rows, write_csv
    from test_resume import start, wait_for_checkpoint
    from test_task import run_cli
    root = tmp_path_factory.mktemp("spans")
    data = {"train": write_csv(root / "train.csv", labelled_rows(600, 1)),
            "validation": tiny_data["validation"]}
    uninterrupted = start(span_args(tiny_encoder_dir, data, root / "uninterrupted"))
    killed = start(span_args(tiny_encoder_dir, data, root / "killed"))
    try:
        wait_for_checkpoint(killed, root / "killed" / "checkpoints" / "resume", 2)
        killed.send_signal(9)  # SIGKILL
        killed.communicate(timeout=60)
        assert not (root / "killed" / "metrics.json").exists()
        rerun = run_cli(*span_args(tiny_encoder_dir, data, root / "killed"))
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        out, _ = uninterrupted.communicate(timeout=300)
        assert uninterrupted.returncode == 0, out
    finally:
        uninterrupted.kill()
        killed.kill()
    return {"uninterrupted": root / "uninterrupted", "resumed": root / "killed", "rerun": rerun}


def history_of(job_dir):
    from conftest import read_csv
    return [{k: float(v) for k, v in row.items() if k != "seconds"}
            for row in read_csv(job_dir / "eval_history.csv")]


def test_eval_every_steps_writes_a_history_row_per_evaluation(span_runs):
    rows = history_of(span_runs["uninterrupted"])
    assert [(int(r["epoch"]), int(r["step"])) for r in rows] == [(1, 30), (2, 60), (3, 90), (4, 120), (5, 150)]


def test_a_run_killed_between_evaluations_mid_epoch_resumes_like_an_uninterrupted_one(span_runs):
    from conftest import metrics_of
    assert "resumed after epoch 2" in span_runs["rerun"].stdout
    resumed, uninterrupted = history_of(span_runs["resumed"]), history_of(span_runs["uninterrupted"])
    for got, expected in zip(resumed, uninterrupted, strict=True):
        assert got == pytest.approx(expected, rel=1e-5, abs=1e-7), got["step"]
    got, expected = metrics_of(span_runs["resumed"]), metrics_of(span_runs["uninterrupted"])
    assert got["best_epoch"] == expected["best_epoch"]
    assert got["validation"]["loss"] == pytest.approx(expected["validation"]["loss"], rel=1e-5)
