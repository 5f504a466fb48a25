"""The training controls Trainer/Keras users expect (issue #23): --max-steps, --log-every-steps,
--eval-every-steps and --gradient-accumulation-steps, each on a tiny Keras model in process where
it can be, plus short real runs (one with the first two and accumulation, two killed and resumed
between evaluations)."""

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
    model.fit(batches(), epochs=3, steps_per_epoch=5, verbose=0, callbacks=[callbacks.StepLimit(7), history])
    assert int(model.optimizer.iterations.numpy()) == 7
    assert history.epoch == [0, 1]  # the second epoch ended at step 7 and was recorded


@pytest.mark.parametrize(
    "steps_per_epoch, epochs, max_steps, expected",
    [
        (12, 3, 0, (3, 36)),  # --epochs decides
        (12, 3, 17, (2, 17)),  # overrides --epochs: the second epoch stops at step 17
        (12, 3, 24, (2, 24)),
        (12, 1, 100, (9, 100)),
    ],
)
def test_max_steps_decides_the_epochs_and_the_schedules_length(steps_per_epoch, epochs, max_steps, expected):
    from trainer.training import stages

    assert stages.training_length(steps_per_epoch, epochs, max_steps) == expected


@pytest.mark.parametrize(
    "examples, epochs", [(1, 6), (4_999, 6), (5_000, 4), (19_999, 4), (20_000, 3), (10_000_000, 3)]
)
def test_without_epochs_small_training_sets_get_more_passes(examples, epochs):
    from trainer.training import stages

    assert stages.default_epochs(examples) == epochs


@pytest.mark.parametrize(
    "hidden_size, rate", [(16, 3e-4), (384, 3e-4), (511, 3e-4), (512, 1e-4), (768, 1e-4), (1024, 5e-5)]
)
def test_without_a_learning_rate_narrower_encoders_train_at_a_higher_one(hidden_size, rate):
    from trainer.training import stages

    assert stages.default_learning_rate(hidden_size) == rate


@pytest.mark.parametrize("hidden_size, decay", [(16, 0.8), (384, 0.8), (511, 0.8), (512, 0.9), (768, 0.9), (1024, 0.9)])
def test_without_a_layer_decay_wider_encoders_keep_more_of_the_rate_in_their_lower_layers(hidden_size, decay):
    from trainer.training import stages

    assert stages.default_layer_decay(hidden_size) == decay


def test_an_explicit_layer_decay_of_one_is_kept_not_replaced_by_the_default():
    from trainer import task_registry
    from trainer.training import stages

    given = config_lib.build_config(["--layer-decay", "1.0"], {}).train.layer_decay
    unset = config_lib.build_config([], {}).train.layer_decay
    classifier = task_registry.by_name("classification")
    assert stages.layer_decay_for(given, 768, classifier) == 1.0
    assert stages.layer_decay_for(unset, 768, classifier) == 0.9


@pytest.mark.parametrize("hidden_size, decay", [(384, 0.8), (511, 0.8), (512, 1.0), (768, 1.0)])
def test_a_tagger_trains_encoders_512_wide_and_wider_without_layer_decay(hidden_size, decay):
    from trainer import task_registry
    from trainer.training import stages

    tagger = task_registry.by_name("token-classification")
    assert stages.layer_decay_for(None, hidden_size, tagger) == decay


def test_a_taggers_explicit_layer_decay_is_kept():
    from trainer import task_registry
    from trainer.training import stages

    assert stages.layer_decay_for(0.9, 768, task_registry.by_name("token-classification")) == 0.9


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
    model.fit(
        batches(),
        epochs=2,
        steps_per_epoch=5,
        verbose=0,
        callbacks=[callbacks.StepScalars(str(tmp_path), every=3, batch_size=4)],
    )
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
    result = run_cli(
        *train_args(
            tiny_encoder_dir,
            tiny_data,
            job_dir,
            "--max-steps",
            "17",
            "--log-every-steps",
            "5",
            "--gradient-accumulation-steps",
            "2",
        )
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir


@pytest.mark.slow  # stepped_run: a run of its own (CI's slow line)
def test_a_run_with_max_steps_takes_exactly_that_many_steps_and_decays_to_zero_there(stepped_run):
    from conftest import metrics_of, read_csv

    metrics = metrics_of(stepped_run)
    assert metrics["train_steps"] == 17 and metrics["hyperparameters"]["max_steps"] == 17
    history = read_csv(stepped_run / "eval_history.csv")
    assert 2 <= len(history) < 6  # not --epochs 6
    # The schedule ends at step 17: the last step's rate is 1/16 of the peak (1e-2), one step of
    # the 16 after the one-step warm-up before zero.
    assert float(history[-1]["learning_rate"]) == pytest.approx(1e-2 / 16, rel=1e-4)


@pytest.mark.slow  # stepped_run: a run of its own (CI's slow line)
def test_a_run_with_gradient_accumulation_takes_a_step_per_two_batches(stepped_run):
    log = (stepped_run / "training.log").read_text()
    # 90 rows in batches of 8: 12 batches an epoch, 6 optimizer steps; 17 steps take 3 epochs
    assert "gradients of 2 batches summed per step (effective batch 16); 6 steps per epoch, 3 epochs" in log


@pytest.mark.slow  # stepped_run: a run of its own (CI's slow line)
def test_a_run_writes_step_scalars_to_tensorboard(stepped_run):
    written = scalars(stepped_run / "tensorboard" / "steps")
    assert [step for step, _ in written["loss"]] == [5, 10, 15]


# --- --eval-every-steps, killed and resumed ------------------------------------------------------


def span_args(tiny_encoder_dir, data, job_dir):
    """600 rows in batches of 8: 75 steps an epoch, 150 in 2 epochs, evaluated every 30: five
    evaluations, the 2nd at step 60 in the middle of the first epoch, the 3rd across its end."""
    return [
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        data["train"],
        "--validation-file",
        data["validation"],
        "--job-dir",
        job_dir,
        "--epochs",
        "2",
        "--eval-every-steps",
        "30",
        "--batch-size",
        "8",
        "--learning-rate",
        "1e-2",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
        "--train-word-embeddings",
    ]


@pytest.fixture(scope="module")
def span_runs(tiny_encoder_dir, tiny_data, tmp_path_factory):
    from conftest import labelled_rows, write_csv
    from test_resume import start, wait_for_checkpoint
    from test_task import run_cli

    root = tmp_path_factory.mktemp("spans")
    data = {"train": write_csv(root / "train.csv", labelled_rows(600, 1)), "validation": tiny_data["validation"]}
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


@pytest.mark.slow  # the span runs, one killed and resumed (about 60 s): run by hand (docs/testing.md), not in CI
def test_with_eval_every_steps_every_log_line_counts_spans_not_epochs(span_runs):
    import re

    log = span_runs["rerun"].stdout
    assert "resumed after span 2" in log and "span 5/5 done" in log
    # "75 steps per epoch, 2 epochs" is about passes over the data, which stay epochs
    assert re.findall(r"\bepochs? \d", log) == []


def history_of(job_dir):
    from conftest import read_csv

    return [{k: float(v) for k, v in row.items() if k != "seconds"} for row in read_csv(job_dir / "eval_history.csv")]


@pytest.mark.slow  # the span runs, one killed and resumed (about 60 s): run by hand (docs/testing.md), not in CI
def test_eval_every_steps_writes_a_history_row_per_evaluation(span_runs):
    rows = history_of(span_runs["uninterrupted"])
    assert [(int(r["epoch"]), int(r["step"])) for r in rows] == [(1, 30), (2, 60), (3, 90), (4, 120), (5, 150)]


@pytest.mark.slow  # the span runs, one killed and resumed (about 60 s): run by hand (docs/testing.md), not in CI
def test_a_run_killed_between_evaluations_mid_epoch_resumes_like_an_uninterrupted_one(span_runs):
    from conftest import metrics_of

    assert "resumed after span 2" in span_runs["rerun"].stdout
    resumed, uninterrupted = history_of(span_runs["resumed"]), history_of(span_runs["uninterrupted"])
    for got, expected in zip(resumed, uninterrupted, strict=True):
        assert got == pytest.approx(expected, rel=1e-5, abs=1e-7), got["step"]
    got, expected = metrics_of(span_runs["resumed"]), metrics_of(span_runs["uninterrupted"])
    assert got["best_epoch"] == expected["best_epoch"]
    assert got["validation"]["loss"] == pytest.approx(expected["validation"]["loss"], rel=1e-5)


# --- --gradient-accumulation-steps ---------------------------------------------------------------


def accumulation_classifier():
    """A small Classifier with the trainer's optimizer (AdamW, weight decay, global-norm clipping)."""
    import tf_keras

    from trainer.modeling import heads, optimization

    tf_keras.utils.set_random_seed(1)
    inputs = {"x": tf_keras.Input((4,), name="x")}
    hidden = tf_keras.layers.Dense(8, activation="tanh")(inputs["x"])
    model = heads.Classifier(inputs=inputs, outputs=tf_keras.layers.Dense(3, dtype="float32")(hidden))
    model.compile(
        optimizer=optimization.build_optimizer(1e-2, 10, 0.0, 0.01, 0.5),
        loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def micro_batches(sizes=(4, 4, 2)):
    """(features, labels, weights) micro-batches of `sizes` rows, class-weighted like a run."""
    rng = np.random.default_rng(0)
    out = []
    for rows in sizes:
        labels = rng.integers(0, 3, rows)
        out.append(
            (
                {"x": rng.normal(size=(rows, 4)).astype(np.float32)},
                labels.astype(np.int32),
                np.array([0.5, 1.0, 2.0], np.float32)[labels],
            )
        )
    return out


def one_step(model, element):
    import tensorflow as tf

    model.fit(tf.data.Dataset.from_tensors(element), epochs=1, steps_per_epoch=1, verbose=0)
    return model.get_weights()


@pytest.mark.parametrize("policy, tolerance", [("float32", 1e-6), ("mixed_float16", 2e-3)])
def test_accumulating_k_micro_batches_is_one_step_on_their_concatenation(policy, tolerance):
    import tf_keras

    parts = micro_batches()
    whole = (
        {"x": np.concatenate([p[0]["x"] for p in parts])},
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
    )
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        accumulated = one_step(accumulation_classifier(), tuple(parts))
        together = one_step(accumulation_classifier(), whole)
        untouched = accumulation_classifier().get_weights()
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    for got, expected, before in zip(accumulated, together, untouched):
        assert not np.allclose(expected, before)  # the step moved every weight
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


def test_grouped_batches_hold_every_batch_once_in_order_and_fill_a_short_group_with_nothing():
    import tensorflow as tf

    from trainer.data import input_pipeline

    batches = tf.data.Dataset.range(5).map(lambda i: ({"x": tf.fill([2, 3], i)}, tf.fill([2], i), tf.ones([2])))
    groups = list(input_pipeline.grouped(batches, 2).as_numpy_iterator())
    assert len(groups) == 3 and all(len(group) == 2 for group in groups)
    seen = [int(features["x"][0, 0]) for group in groups for features, _, _ in group if len(features["x"])]
    assert seen == [0, 1, 2, 3, 4]
    ((features, labels, weights),) = groups[-1][1:]
    assert features["x"].shape == (0, 3) and labels.shape == (0,) and weights.shape == (0,)
    static = list(input_pipeline.grouped(batches, 2, static=True).as_numpy_iterator())[-1][1]
    assert static[0]["x"].shape == (2, 3) and static[2].tolist() == [0.0, 0.0]


MIRRORED_STEP = """
import json, sys
import numpy as np
import trainer
import tensorflow as tf
cpu, = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, sys.argv[1])
from test_training_controls import accumulation_classifier, micro_batches

parts = micro_batches((4, 4, 2, 6, 2, 0))  # replica 0 gets the first three, replica 1 the others
groups = [tuple(parts[:3]), tuple(parts[3:])]
whole = ({"x": np.concatenate([p[0]["x"] for p in parts])},
         np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]))
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = accumulation_classifier()
data = strategy.distribute_datasets_from_function(
    lambda context: tf.data.Dataset.from_tensors(groups[0]).concatenate(
        tf.data.Dataset.from_tensors(groups[1])))
model.fit(data, epochs=1, steps_per_epoch=1, verbose=0)
single = accumulation_classifier()
single.fit(tf.data.Dataset.from_tensors(whole), epochs=1, steps_per_epoch=1, verbose=0)
print(json.dumps(max(float(np.abs(a - b).max()) for a, b in zip(model.get_weights(), single.get_weights()))))
"""


def test_accumulation_under_mirrored_strategy_is_one_step_on_every_replicas_rows(tmp_path):
    """Two replicas, each summing three micro-batches of its own (one of them empty), make
    exactly the step one device makes on all their rows at once."""
    import os
    import subprocess
    import sys

    script = tmp_path / "mirrored.py"
    script.write_text(MIRRORED_STEP)
    from conftest import ROOT

    here = os.path.dirname(os.path.abspath(__file__))
    result = subprocess.run(
        [sys.executable, str(script), here],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.strip().splitlines()[-1]) < 1e-6


def test_the_batch_line_says_when_length_buckets_make_batches_smaller():
    """Issue #49: 18 rows logged "batch 32 ... 6 steps per epoch" while batches held 3 rows."""
    from trainer.training.stages import smaller_batches_note

    assert smaller_batches_note(18, 6, 32) == (
        " (of 3.0 rows on average: texts of different lengths are batched apart, and a length "
        "with fewer rows than --batch-size makes a smaller batch)"
    )
    assert smaller_batches_note(18, 1, 32) == ""
    assert smaller_batches_note(10_000, 320, 32) == ""
