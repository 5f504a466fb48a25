"""A run writes int8 and bfloat16 copies of its model beside the float32 one, each only when it
agrees with float32 on validation; predict and serve load the precision asked for, `auto` the
fastest the dir holds for the machine; trainer.export_quantized writes a copy for a finished run.

Slow tier (converting and checking both copies takes most of a minute), which CI runs on both
TensorFlow minors; the default suite keeps the copies' checks themselves (test_agreement.py,
test_copy_log.py)."""

import json
import logging
import re
import shutil

import numpy as np
import pytest
from conftest import TINY_TASK_FLAGS, metrics_of, read_csv
from test_predict import run_cli
from test_task import run_in_process

from trainer.errors import UserError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def copies_run(tiny_encoder_dir, tiny_data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("precisions") / "job"
    result = run_cli(
        "trainer.task",
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        tiny_data["train"],
        "--validation-file",
        tiny_data["validation"],
        "--testing-file",
        tiny_data["test"],
        "--job-dir",
        job_dir,
        "--epochs",
        "6",
        "--batch-size",
        "16",
        "--max-seq-length",
        "16",
        "--learning-rate",
        "1e-3",
        "--export-bfloat16",
        "on",
        "--export-int8",
        "on",
        *TINY_TASK_FLAGS,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir, result


MARKERS = {"bfloat16": "saved_model.pb", "int8": "model.tflite"}


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_the_run_writes_each_checked_copy_and_its_figures(copies_run, precision):
    job_dir, result = copies_run
    block = metrics_of(job_dir)["precisions"][precision]
    assert block["written"] and block["passed"] and block["label_agreement"] >= 0.99
    assert abs(block["change_points"]) <= 0.5 and block["rows"] == 30
    assert (job_dir / "model" / precision / MARKERS[precision]).exists()
    manifest = json.loads((job_dir / "model" / "precisions.json").read_text())
    assert manifest[precision]["label_agreement"] == block["label_agreement"]
    assert f"{precision} model: labels agree with float32 on" in result.stdout
    report = (job_dir / "report.html").read_text()
    assert f"The {precision} model" in report and f"{100 * block['label_agreement']:.2f}%" in report


def test_the_int8_copy_is_less_than_half_the_size_of_the_float32_model(copies_run):
    block = metrics_of(copies_run[0])["precisions"]["int8"]
    assert block["size_bytes"] < block["float32_size_bytes"] / 2


def test_the_run_prints_no_native_library_lines(copies_run):
    """LiteRT announces its XNNPACK delegate, and TF 2.20's TFLite converter logs, on stderr from
    C++; the run keeps both out."""
    printed = copies_run[1].stdout + copies_run[1].stderr
    assert "XNNPACK" not in printed and "absl::InitializeLog" not in printed
    assert not re.search(r"^[IWE]\d{4} [\d:. ]+\d+ \w+\.cc", printed, re.MULTILINE)


def predict(job_dir, tmp_path, tiny_data, precision):
    output = tmp_path / f"{precision}.csv"
    result = run_cli(
        "trainer.predict",
        "--model-dir",
        job_dir / "model",
        "--input",
        tiny_data["test"],
        "--output",
        output,
        "--precision",
        precision,
    )
    return result, output


def test_predict_runs_the_precision_asked_for_with_the_labels_float32_gives(copies_run, tmp_path, tiny_data):
    job_dir, _ = copies_run
    runs = {p: predict(job_dir, tmp_path, tiny_data, p) for p in ("float32", "bfloat16", "int8")}
    for precision, (result, _) in runs.items():
        assert result.returncode == 0, result.stderr
        assert f"loaded the {precision} model" in result.stdout
    rows = {p: read_csv(out) for p, (_, out) in runs.items()}
    for precision in ("bfloat16", "int8"):
        assert list(rows[precision][0]) == list(rows["float32"][0])  # the same columns
        agree = np.mean(
            [a["predicted_label"] == b["predicted_label"] for a, b in zip(rows["float32"], rows[precision])]
        )
        assert agree >= 0.9  # 30 rows of a tiny model: the run's own check asked 99% on validation


def test_predict_auto_loads_the_copy_its_check_timed_faster_and_says_why(copies_run, tmp_path, tiny_data):
    """The tiny model's own timings are anyone's guess: the copy's check is given 1.96x by hand."""
    job_dir = copied_run(copies_run, tmp_path)
    manifest = job_dir / "model" / "precisions.json"
    checks = json.loads(manifest.read_text())
    checks["int8"]["speedup"], checks["bfloat16"]["speedup"] = 1.96, 1.0
    manifest.write_text(json.dumps(checks))
    result, _ = predict(job_dir, tmp_path, tiny_data, "auto")
    assert result.returncode == 0 and "loaded the int8 model" in result.stdout
    assert "--precision auto: int8: the int8 copy measured 1.96x float32's speed at export" in result.stdout


def test_predict_asked_for_a_precision_the_dir_lacks_is_one_line_and_exit_2(copies_run, tmp_path, tiny_data):
    job_dir = finished_copy(copies_run, tmp_path, "int8")
    output = tmp_path / "int8.csv"
    result = run_in_process(
        "--model-dir",
        job_dir / "model",
        "--input",
        tiny_data["test"],
        "--output",
        output,
        "--precision",
        "int8",
        module="trainer.predict",
    )
    assert result.returncode == 2 and not output.exists()
    assert result.stderr.strip().splitlines() == [
        f"error: --precision int8: {job_dir / 'model'} holds no int8 model (it holds float32, "
        f"bfloat16); python -m trainer.export_quantized --model-dir {job_dir / 'model'} "
        f"--precision int8 writes it"
    ]


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_serve_loads_the_precision_asked_for(copies_run, caplog, precision):
    from trainer.serving.server import ModelService

    job_dir, _ = copies_run
    with caplog.at_level(logging.INFO, logger="trainer"):
        run_batch = ModelService(str(job_dir / "model"), 8, 0.001, precision=precision).load()
    predictions, _ = run_batch(["i love it", "so bad"])
    assert len(predictions) == 2 and set(predictions[0]) >= {"label", "probabilities"}
    assert f"model ready: {precision} ({job_dir / 'model' / precision})" in caplog.text


def copied_run(copies_run, tmp_path):
    """The finished run's job dir, copied."""
    job_dir = tmp_path / "job"
    shutil.copytree(copies_run[0], job_dir)
    return job_dir


def finished_copy(copies_run, tmp_path, precision):
    """The finished run's job dir, copied, without its `precision` model."""
    job_dir = copied_run(copies_run, tmp_path)
    shutil.rmtree(job_dir / "model" / precision)
    manifest = job_dir / "model" / "precisions.json"
    held = json.loads(manifest.read_text())
    del held[precision]
    manifest.write_text(json.dumps(held))
    return job_dir


@pytest.mark.parametrize("precision, flags", [("int8", ()), ("bfloat16", ("--precision", "bfloat16"))])
def test_export_quantized_writes_the_copy_for_a_finished_run(copies_run, tmp_path, precision, flags):
    """int8 by default."""
    job_dir = finished_copy(copies_run, tmp_path, precision)
    result = run_cli("trainer.export_quantized", "--model-dir", job_dir / "model", *flags)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (job_dir / "model" / precision / MARKERS[precision]).exists()
    assert json.loads((job_dir / "model" / "precisions.json").read_text())[precision]["passed"]


def test_export_quantized_of_an_unfinished_run_is_one_line_and_exit_2(copies_run, tmp_path):
    job_dir = finished_copy(copies_run, tmp_path, "int8")
    (job_dir / "metrics.json").unlink()
    result = run_in_process("--model-dir", job_dir / "model", module="trainer.export_quantized")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --job-dir: {job_dir} holds no finished run (no metrics.json)"
    ]


def refused_copy(copies_run, tmp_path, precision):
    """(job dir, the check's figures) of a finished run whose `precision` copy was checked with
    weights that are not the model's (its logits negated), and so refused."""
    from trainer.serving import export
    from trainer.training import checked_copies, results

    job_dir = finished_copy(copies_run, tmp_path, precision)
    model_dir = str(job_dir / "model")
    ctx = checked_copies.run_context(model_dir, str(job_dir))
    weights = [v.numpy() for v in export.load_module(model_dir).classifier_variables]
    logits_kernel = max(i for i, w in enumerate(weights) if w.ndim == 2)  # the last dense kernel
    weights[logits_kernel] = -weights[logits_kernel]
    return job_dir, results.write_copy(ctx, model_dir, weights, precision)


@pytest.mark.parametrize("precision", ["bfloat16", "int8"])
def test_a_copy_that_disagrees_with_float32_is_refused_and_not_written(copies_run, tmp_path, caplog, precision):
    """The copy decides otherwise: its model is not written, and precisions.json records the
    refusal."""
    with caplog.at_level(logging.WARNING, logger="trainer"):
        job_dir, figures = refused_copy(copies_run, tmp_path, precision)
    assert not figures["passed"] and figures["label_agreement"] < 0.99
    assert not (job_dir / "model" / precision).exists()
    assert json.loads((job_dir / "model" / "precisions.json").read_text())[precision] == {"written": False, **figures}
    assert f"{precision} model refused, not written: labels agree with float32 on" in caplog.text


def test_predict_asked_for_a_copy_its_check_refused_says_so(copies_run, tmp_path, tiny_data):
    """Issue #64: not the export_quantized command, which would refuse it again."""
    job_dir, figures = refused_copy(copies_run, tmp_path, "int8")
    model_dir = job_dir / "model"
    result = run_in_process(
        "--model-dir",
        model_dir,
        "--input",
        tiny_data["test"],
        "--output",
        tmp_path / "int8.csv",
        "--precision",
        "int8",
        module="trainer.predict",
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --precision int8: {model_dir} holds no int8 model (it holds float32, bfloat16); "
        f"its check refused it, not written: {figures['why']}"
    ]


def test_export_quantized_of_a_model_dir_outside_a_job_dir_asks_for_job_dir(tmp_path, monkeypatch):
    """Issue #49: a copied model dir gave "--job-dir:  is not a job dir" (an empty path)."""
    from trainer.training import checked_copies

    (tmp_path / "model").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        UserError,
        match=rf"^--job-dir: not given, and {tmp_path}, the directory "
        rf"--model-dir model is in, is not a job dir",
    ):
        checked_copies.parent_job_dir("model")
