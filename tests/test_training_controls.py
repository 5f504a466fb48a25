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
