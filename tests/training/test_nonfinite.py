"""A loss or an output that is NaN or infinite (issue 37, item 2): a diverging run stops at the
first one with one error and exports nothing; a model whose outputs are not finite is neither
exported, nor used by trainer.predict, nor served; every JSON file is strict JSON."""

import json
import math

import numpy as np
import pytest

from trainer.errors import UserError

# --- a real diverging run ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def diverged(tiny_encoder_dir, tiny_data, tmp_path_factory):
    """The tiny task at --learning-rate 1000: epoch 1 ends with a huge but finite loss, the
    loss is NaN early in epoch 2."""
    from test_task import run_cli, train_args

    job_dir = tmp_path_factory.mktemp("diverged") / "job"
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, job_dir, "--learning-rate", "1000"))
    return job_dir, result


@pytest.mark.slow  # a real run or export: run by hand (docs/testing.md), not in CI
def test_a_diverging_run_exits_2_with_one_error_line_saying_when_and_why(diverged):
    _, result = diverged
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: training diverged: the training loss became nan at step "), (
        result.stderr
    )
    for cause in ("(epoch 2 of 6)", "--learning-rate", "float16 without loss scaling", "targets"):
        assert cause in lines[0]
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.slow  # a real run or export: run by hand (docs/testing.md), not in CI
def test_a_diverging_run_keeps_the_last_finite_checkpoint_and_exports_nothing(diverged):
    from conftest import read_csv

    job_dir, _ = diverged
    assert not (job_dir / "model").exists() and not (job_dir / "metrics.json").exists()
    assert not (job_dir / "report.html").exists()
    resume = sorted(p.name for p in (job_dir / "checkpoints" / "resume").glob("ckpt-*.index"))
    assert resume == ["ckpt-1.index"]
    history = read_csv(job_dir / "eval_history.csv")
    assert [row["epoch"] for row in history] == ["1"]
    assert all(math.isfinite(float(value)) for value in history[0].values())


@pytest.mark.slow  # a real run or export: run by hand (docs/testing.md), not in CI
def test_a_diverging_run_records_its_error_in_training_log(diverged):
    job_dir, _ = diverged
    assert (job_dir / "training.log").read_text().splitlines()[-1].startswith("error: training diverged")


def test_a_nan_validation_loss_stops_the_run_before_the_epoch_is_recorded():
    import tf_keras

    from trainer.training import callbacks

    guard = callbacks.NonFiniteLoss(epochs=3, learning_rate=1e-3)
    guard.set_model(tf_keras.Sequential([tf_keras.Input((1,)), tf_keras.layers.Dense(1)]))
    guard.model.compile(optimizer="sgd", loss="mse")
    guard.on_epoch_begin(1)
    guard.on_epoch_end(1, {"loss": 0.5, "val_loss": 0.7})  # finite: nothing happens
    with pytest.raises(
        UserError,
        match=r"the validation loss became inf at step 0 \(epoch 2 of 3\)"
        r".*the checkpoint of epoch 1, the last with a finite loss"
        r".*Once fixed, rerun: the same command resumes from that "
        r"checkpoint; with changed flags, add --overwrite to start "
        r"over$",
    ):
        guard.on_epoch_end(1, {"loss": 0.5, "val_loss": float("inf")})


def test_a_loss_nan_before_any_checkpoint_says_the_next_command_starts_over():
    """Issue #49: it said to rerun with --overwrite, though any rerun is a new run then."""
    import tf_keras

    from trainer.training import callbacks

    guard = callbacks.NonFiniteLoss(epochs=3, learning_rate=1e-3)
    guard.set_model(tf_keras.Sequential([tf_keras.Input((1,)), tf_keras.layers.Dense(1)]))
    guard.model.compile(optimizer="sgd", loss="mse")
    guard.on_epoch_begin(0)
    with pytest.raises(
        UserError,
        match=r"no epoch finished before it.*Once fixed, rerun: the next "
        r"command starts over$",
    ):
        guard.on_train_batch_end(0, {"loss": float("nan")})


# --- a model whose outputs are not finite --------------------------------------------------------


def test_outputs_not_finite_on_validation_rows_refuse_the_export():
    from trainer.inference import finite

    finite.check_finite_outputs(np.array([[0.1, 2.0], [3.0, -1.0]]), "validation rows")
    with pytest.raises(UserError, match="NaN or infinite on 2 of the 3 validation rows.*neither exported nor served"):
        finite.check_finite_outputs(np.array([[0.1, np.nan], [3.0, -1.0], [np.inf, 0.0]]), "validation rows")


@pytest.fixture(scope="module")
def nan_model_dir(tiny_encoder_dir, tmp_path_factory):
    """A real export of the tiny classifier whose head holds NaN weights: what a diverged run
    exported before, and what an older export of one still is."""
    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.serving import export

    encoder = load_encoder(tiny_encoder_dir, seq_length=16)
    model = heads.build_classifier(encoder.network, 3, "mean", dropout=0.0)
    head = model.get_layer("logits")
    head.set_weights([np.full(w.shape, np.nan, np.float32) for w in head.get_weights()])
    model_dir = tmp_path_factory.mktemp("nan_model") / "model"
    export.export(export.ServingModule(encoder.preprocessor, model, ["a", "b", "c"], 16), str(model_dir))
    return model_dir


@pytest.mark.slow  # a real run or export: run by hand (docs/testing.md), not in CI
def test_trainer_predict_refuses_a_model_whose_probabilities_are_nan(nan_model_dir, tmp_path):
    from conftest import write_csv
    from test_task import run_in_process

    rows = write_csv(tmp_path / "in.csv", [("i love it", "x"), ("so bad", "y")])
    result = run_in_process(
        "--model-dir", nan_model_dir, "--input", rows, "--output", tmp_path / "out.csv", module="trainer.predict"
    )
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    # trainer.predict warms the model up on one text first: it fails there, before any row.
    assert (
        len(lines) == 1 and "NaN or infinite on 1 of the 1 texts of a batch given to --model-dir's model" in lines[0]
    ), result.stderr
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.slow  # a real run or export: run by hand (docs/testing.md), not in CI
def test_the_server_refuses_to_serve_a_model_whose_probabilities_are_nan(nan_model_dir):
    from trainer.serving.server import ModelService

    with pytest.raises(UserError, match="NaN or infinite on 1 of the 1 texts"):
        ModelService(str(nan_model_dir), max_batch_size=4, max_wait=0.01).load()


# --- strict JSON ---------------------------------------------------------------------------------


def strict_loads(text):
    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_written_as_null_never_as_bare_nan_tokens():
    from trainer import strict_json

    value = {
        "loss": float("nan"),
        "rows": [1.5, float("inf"), np.float32("-inf")],
        "ece": np.float32(0.25),
        "name": "x",
    }
    assert strict_loads(strict_json.dumps(value)) == {"loss": None, "rows": [1.5, None, None], "ece": 0.25, "name": "x"}
