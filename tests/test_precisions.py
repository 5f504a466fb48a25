"""A run writes a bfloat16 copy of its model beside the float32 one only when the copy agrees
with float32 on validation; predict and serve load the precision asked for, `auto` the fastest
the machine computes natively; trainer.export_quantized writes the copy for a finished run."""
import json
import logging
import shutil

import numpy as np
import pytest

from conftest import TINY_TASK_FLAGS, metrics_of, read_csv
from test_predict import run_cli
from test_task import run_in_process


@pytest.fixture(scope="module")
def bf16_run(tiny_encoder_dir, tiny_data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("precisions") / "job"
    result = run_cli("trainer.task", "--encoder", tiny_encoder_dir, "--training-file", tiny_data["train"],
                     "--validation-file", tiny_data["validation"], "--testing-file", tiny_data["test"],
                     "--job-dir", job_dir, "--epochs", "6", "--batch-size", "16", "--max-seq-length", "16",
                     "--learning-rate", "1e-3", "--export-bfloat16", "on", *TINY_TASK_FLAGS)
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir, result


def test_the_run_writes_the_checked_bfloat16_copy_and_its_figures(bf16_run):
    job_dir, result = bf16_run
    block = metrics_of(job_dir)["precisions"]["bfloat16"]
    assert block["written"] and block["passed"] and block["label_agreement"] >= 0.99
    assert abs(block["change_points"]) <= 0.5 and block["rows"] == 30
    assert (job_dir / "model" / "bfloat16" / "saved_model.pb").exists()
    manifest = json.loads((job_dir / "model" / "precisions.json").read_text())
    assert manifest["bfloat16"]["label_agreement"] == block["label_agreement"]
    assert "bfloat16 model: labels agree with float32 on" in result.stdout
    report = (job_dir / "report.html").read_text()
    assert "The bfloat16 model" in report and f"{100 * block['label_agreement']:.2f}%" in report


def predict(job_dir, tmp_path, tiny_data, precision):
    output = tmp_path / f"{precision}.csv"
    result = run_cli("trainer.predict", "--model-dir", job_dir / "model", "--input", tiny_data["test"],
                     "--output", output, "--precision", precision)
    return result, output


def test_predict_runs_the_precision_asked_for_with_the_labels_float32_gives(bf16_run, tmp_path, tiny_data):
    job_dir, _ = bf16_run
    runs = {p: predict(job_dir, tmp_path, tiny_data, p) for p in ("float32", "bfloat16")}
    for precision, (result, _) in runs.items():
        assert result.returncode == 0, result.stderr
        assert f"loaded the {precision} model" in result.stdout
    labels = {p: [row["predicted_label"] for row in read_csv(out)] for p, (_, out) in runs.items()}
    agree = np.mean([a == b for a, b in zip(labels["float32"], labels["bfloat16"])])
    assert agree >= 0.9  # 30 rows of a tiny model: the run's own check asked 99% on validation


def test_predict_asked_for_a_precision_the_dir_lacks_is_one_line_and_exit_2(bf16_run, tmp_path, tiny_data):
    job_dir, _ = bf16_run
    output = tmp_path / "int8.csv"
    result = run_in_process("--model-dir", job_dir / "model", "--input", tiny_data["test"], "--output",
                            output, "--precision", "int8", module="trainer.predict")
    assert result.returncode == 2 and not output.exists()
    assert result.stderr.strip().splitlines() == [
        f"error: --precision int8: {job_dir / 'model'} holds no int8 model (it holds float32, "
        f"bfloat16); this version writes no int8 model"]


def test_serve_loads_the_precision_asked_for(bf16_run, caplog):
    from trainer.serving.server import ModelService

    job_dir, _ = bf16_run
    with caplog.at_level(logging.INFO, logger="trainer"):
        run_batch = ModelService(str(job_dir / "model"), 8, 0.001, precision="bfloat16").load()
    predictions, _ = run_batch(["i love it", "so bad"])
    assert len(predictions) == 2 and set(predictions[0]) >= {"label", "probabilities"}
    assert f"model ready: bfloat16 ({job_dir / 'model' / 'bfloat16'})" in caplog.text


def finished_copy(bf16_run, tmp_path):
    """The finished run's job dir, copied, without its bfloat16 model."""
    job_dir = tmp_path / "job"
    shutil.copytree(bf16_run[0], job_dir)
    shutil.rmtree(job_dir / "model" / "bfloat16")
    (job_dir / "model" / "precisions.json").unlink()
    return job_dir


def test_export_quantized_writes_the_copy_for_a_finished_run(bf16_run, tmp_path):
    job_dir = finished_copy(bf16_run, tmp_path)
    result = run_cli("trainer.export_quantized", "--model-dir", job_dir / "model")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (job_dir / "model" / "bfloat16" / "saved_model.pb").exists()
    assert json.loads((job_dir / "model" / "precisions.json").read_text())["bfloat16"]["passed"]


def test_export_quantized_of_an_unfinished_run_is_one_line_and_exit_2(bf16_run, tmp_path):
    job_dir = finished_copy(bf16_run, tmp_path)
    (job_dir / "metrics.json").unlink()
    result = run_in_process("--model-dir", job_dir / "model", module="trainer.export_quantized")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --job-dir: {job_dir} holds an unfinished run (no metrics.json yet); finish or "
        f"resume it with trainer.task first"]


def test_a_copy_that_disagrees_with_float32_is_refused_and_not_written(bf16_run, tmp_path, caplog):
    """The weights handed over are not the model's (its logits negated): the copy decides
    otherwise, and neither its SavedModel nor a manifest entry appears."""
    from trainer.serving import export
    from trainer.training import export_quantized, results

    job_dir = finished_copy(bf16_run, tmp_path)
    model_dir = str(job_dir / "model")
    ctx = export_quantized.run_context(model_dir, str(job_dir))
    weights = [v.numpy() for v in export.load_module(model_dir).classifier_variables]
    logits_kernel = max(i for i, w in enumerate(weights) if w.ndim == 2)  # the last dense kernel
    weights[logits_kernel] = -weights[logits_kernel]
    with caplog.at_level(logging.WARNING, logger="trainer"):
        figures = results.write_bfloat16(ctx, model_dir, weights)
    assert not figures["passed"] and figures["label_agreement"] < 0.99
    assert not (job_dir / "model" / "bfloat16").exists()
    assert not (job_dir / "model" / "precisions.json").exists()
    assert "bfloat16 model refused, not written: labels agree with float32 on" in caplog.text
