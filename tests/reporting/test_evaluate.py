"""`python -m trainer.evaluate`: an exported model scored on a labelled file, by the code that
scored its run's test split, at the export's own decisions.

The exports here answer the same for every text: their head's kernel is zero, so its logits are
its bias, and every metric can be worked out by hand. One tiny run checks the rest: its own test
file scores as its metrics.json says, with its float32 model and its int8 copy.
"""

import json
import math

import numpy as np
import pytest
from conftest import write_csv
from test_task import run_cli, run_in_process, train_args

from trainer import task_registry

SEQ = 16


@pytest.fixture(scope="module")
def encoder(tiny_encoder_dir, tmp_path_factory):
    from trainer.modeling.encoders import load_encoder

    return load_encoder(tiny_encoder_dir, seq_length=SEQ, cache_dir=str(tmp_path_factory.mktemp("cache")))


def constant_export(encoder, path, logits, build="classifier", **module):
    """An export whose head outputs `logits` for every text (a tagger: for every token)."""
    from trainer.modeling import heads
    from trainer.serving import export
    from trainer.tasks.tagging import export as tagger_export

    if build == "tagger":
        model = heads.build_tagger(encoder.network, len(logits), 0.0, SEQ)
    else:
        model = heads.build_classifier(encoder.network, len(logits), "mean", 0.0)
    layer = model.get_layer("logits")
    layer.kernel.assign(np.zeros(layer.kernel.shape))
    layer.bias.assign(logits)
    if build == "tagger":
        export.export(tagger_export.TaggingModule(encoder.preprocessor, model, module["names"], SEQ), str(path))
    else:
        export.export(export.ServingModule(encoder.preprocessor, model, max_seq_length=SEQ, **module), str(path))
    return str(path)


def evaluated(model_dir, source, tmp_path, *flags):
    """(exit code, stdout, stderr, --output's JSON or None) of trainer.evaluate, in this process."""
    output = tmp_path / "metrics.json"
    result = run_in_process(
        "--model-dir", model_dir, "--input", source, "--output", output, *flags, module="trainer.evaluate"
    )
    written = json.loads(output.read_text()) if output.exists() else None
    return result.returncode, result.stdout, result.stderr, written


def log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    return logits - np.log(np.exp(logits).sum())


def test_a_binary_export_is_scored_at_its_temperature_and_threshold(encoder, tmp_path):
    """Logits (0, -1): the most probable class is `neg`, but at the export's temperature 2 the
    probability of `pos` is sigmoid(-0.5) = 0.378, above its threshold 0.35: it answers `pos`."""
    model_dir = constant_export(
        encoder,
        tmp_path / "model",
        [0.0, -1.0],
        label_names=["neg", "pos"],
        temperature=2.0,
        task=task_registry.by_name("classification"),
        decisions={"threshold": 0.35},
    )
    source = write_csv(tmp_path / "labelled.csv", [("fine", "pos"), ("good", "pos"), ("ok", "pos"), ("bad", "neg")])
    code, stdout, stderr, written = evaluated(model_dir, source, tmp_path)
    assert code == 0, stderr
    metrics = written["metrics"]
    assert metrics["accuracy"] == 0.75 and metrics["confusion_matrix"] == [[0, 1], [0, 3]]
    # The loss is metrics.json's: of the uncalibrated logits.
    assert metrics["loss"] == pytest.approx(-(3 * log_softmax([0, -1])[1] + log_softmax([0, -1])[0]) / 4, rel=1e-5)
    assert written["decisions"] == {"temperature": 2.0, "threshold": pytest.approx(0.35)}
    assert written["rows"] == 4 and [e["text"] for e in written["errors"]] == ["bad"]
    assert "labelled.csv: loss" in stdout and "accuracy 0.7500" in stdout


@pytest.mark.slow  # an export written and scored through a fresh process, by hand (.ci/run's BY_HAND)
def test_a_multi_label_export_is_scored_at_its_thresholds(encoder, tmp_path):
    """Probabilities (0.73, 0.27, 0.5) against thresholds (0.8, 0.2, 0.5): every row gets b|c."""
    model_dir = constant_export(
        encoder,
        tmp_path / "model",
        [1.0, -1.0, 0.0],
        label_names=["a", "b", "c"],
        task=task_registry.by_name("multi-label"),
        decisions={"thresholds": [0.8, 0.2, 0.5]},
    )
    source = write_csv(
        tmp_path / "labelled.csv", [("x", "b|c"), ("y", "c|b"), ("z", "a"), ("w", "b")], header=("text", "labels")
    )
    code, _, stderr, written = evaluated(model_dir, source, tmp_path)
    assert code == 0, stderr
    metrics = written["metrics"]
    assert metrics["subset_accuracy"] == 0.5
    assert metrics["per_label"]["b"] == pytest.approx({"precision": 0.75, "recall": 1.0, "f1": 6 / 7, "support": 3})
    assert metrics["per_label"]["a"]["recall"] == 0.0 and metrics["thresholds"] == pytest.approx(
        {"a": 0.8, "b": 0.2, "c": 0.5}
    )


@pytest.mark.slow  # an export written and scored through a fresh process, by hand (.ci/run's BY_HAND)
def test_a_regression_exports_loss_is_in_its_training_labels_standard_deviations(encoder, tmp_path):
    """A score of 3 for every text against 1, 2, 4, 5: MSE 2.5, and the loss, as the run measured
    it, 2.5 / 2² with its training labels' standard deviation 2 (which the export keeps)."""
    regression = task_registry.by_name("regression")
    regression.mean, regression.std = 3.0, 2.0
    model_dir = constant_export(encoder, tmp_path / "model", [3.0], label_names=[], task=regression)
    source = write_csv(
        tmp_path / "labelled.csv", [("a", "1"), ("b", "2"), ("c", "4"), ("d", "5")], header=("text", "score")
    )
    code, stdout, stderr, written = evaluated(model_dir, source, tmp_path)
    assert code == 0, stderr
    metrics = written["metrics"]
    assert (metrics["mse"], metrics["mae"], metrics["loss"]) == pytest.approx((2.5, 1.5, 0.625))
    assert written["decisions"]["label_scale"] == [3.0, 2.0]


@pytest.mark.slow  # an export written and scored through a fresh process, by hand (.ci/run's BY_HAND)
def test_a_pair_model_reads_both_texts_of_each_row(encoder, tmp_path):
    model_dir = constant_export(encoder, tmp_path / "model", [2.0, 0.0], label_names=["same", "other"], pair=True)
    source = write_csv(
        tmp_path / "pairs.csv",
        [("a", "b", "same"), ("c", "d", "other"), ("e", "", "same")],
        header=("question1", "question2", "label"),
    )
    code, stdout, stderr, written = evaluated(model_dir, source, tmp_path)
    assert code == 0, stderr
    assert written["metrics"]["confusion_matrix"] == [[1, 0], [1, 0]]
    assert written["rows_skipped"] == {"empty_text": 1}
    assert "1 rows with an empty text were skipped" in stdout


TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
TAGGER_LOGITS = [0.0, 0.0, 0.0, 10.0, 0.0]  # B-LOC for every word


@pytest.fixture(scope="module")
def tagger(encoder, tmp_path_factory):
    """A tagger's export that tags every word B-LOC, exported once for the tests below."""
    return constant_export(
        encoder, tmp_path_factory.mktemp("tagger") / "model", TAGGER_LOGITS, build="tagger", names=TAGS
    )


@pytest.mark.slow  # a tagger trained and exported (CI's slow line)
def test_a_tagger_scores_each_token_of_a_conll_file_at_the_export_word_it_starts(tagger, tmp_path):
    """The export tags every word B-LOC. "U.S." is four of its words and takes the first's tag;
    U+200D has no pieces, so no tag: it is scored as O. Gold LOC, LOC, PER; found LOC (right),
    LOC (on "visit": wrong), LOC (right): precision and recall 2/3."""
    logits, model_dir = TAGGER_LOGITS, tagger
    source = tmp_path / "gold.conll"
    source.write_text("U.S.\tB-LOC\nvisit\tO\n\nParis\tB-LOC\n\u200d\tB-PER\n")
    code, stdout, stderr, written = evaluated(model_dir, source, tmp_path)
    assert code == 0, stderr
    metrics = written["metrics"]
    assert (metrics["precision"], metrics["recall"], metrics["f1"]) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    assert metrics["per_type"]["PER"]["recall"] == 0.0 and metrics["tag_accuracy"] == 0.5
    per_word = [-log_softmax(logits)[3], -log_softmax(logits)[0], -log_softmax(logits)[3], math.log(5)]
    assert metrics["loss"] == pytest.approx(np.mean([np.mean(per_word[:2]), np.mean(per_word[2:])]), rel=1e-5)
    assert "entity F1 0.6667" in stdout and "confusion (rows: true, columns: predicted)" in stdout


def test_an_unknown_label_is_one_line_naming_its_file_line_and_column(encoder, tmp_path):
    model_dir = constant_export(encoder, tmp_path / "model", [0.0, 1.0], label_names=["neg", "pos"])
    source = write_csv(tmp_path / "labelled.csv", [("fine", "pos"), ("meh", "neutral")])
    code, stdout, stderr, written = evaluated(model_dir, source, tmp_path)
    assert (code, written) == (2, None)
    assert stderr.splitlines() == [
        f"error: {source} line 3, column 'label': label 'neutral' never appears in the training "
        f"data (labels: ['neg', 'pos'])"
    ]


@pytest.mark.slow  # the same error line as training's (tests/tasks/tagging/test_tagging.py), through trainer.evaluate
def test_an_unknown_tag_is_one_line_naming_its_file_line_and_token(tagger, tmp_path):
    source = tmp_path / "gold.conll"
    source.write_text("Paris\tB-LOC\n\nAcme\tB-ORG\n")
    code, _, stderr, _ = evaluated(tagger, source, tmp_path)
    assert code == 2 and len(stderr.splitlines()) == 1
    assert stderr.startswith(f"error: {source} line 3") and "'B-ORG'" in stderr and "'Acme'" in stderr


# --- one run, end to end ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tiny_encoder_dir, tiny_data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("evaluate") / "job"
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, job_dir, "--export-int8", "on"))
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir


@pytest.mark.slow  # a run trained for it, by hand (.ci/run's BY_HAND)
@pytest.mark.parametrize("precision", ["float32", "int8"])
def test_the_runs_test_file_scores_as_its_metrics_json_says(trained, tiny_data, tmp_path, precision):
    recorded = json.loads((trained / "metrics.json").read_text())
    assert recorded["precisions"]["int8"]["written"], recorded["precisions"]
    output = tmp_path / "test.json"
    result = run_cli(
        "--model-dir",
        trained / "model",
        "--input",
        tiny_data["test"],
        "--output",
        output,
        "--precision",
        precision,
        module="trainer.evaluate",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"loaded the {precision} model" in result.stdout and "Traceback" not in result.stderr
    scored, test = json.loads(output.read_text())["metrics"], recorded["test"]
    if precision == "float32":
        assert scored["confusion_matrix"] == test["confusion_matrix"]
        assert {k: scored[k] for k in ("accuracy", "macro_f1", "loss")} == pytest.approx(
            {k: test[k] for k in ("accuracy", "macro_f1", "loss")}, rel=1e-4
        )
    else:  # the copy agrees with float32 on 99% of the validation rows, at least
        assert scored["accuracy"] == pytest.approx(test["accuracy"], abs=0.04)


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--output", "metrics.csv"],
            "--output: metrics.csv: the metrics are written as JSON: name a .json file (or .json.gz)",
        ),
        (["--report-errors", "-1"], "--report-errors: must be at least 0, got -1"),
        (["--batch-size", "0"], "--batch-size: must be at least 1, got 0"),
    ],
)
def test_a_bad_flag_is_one_line_before_anything_is_read(tmp_path, flags, message):
    result = run_in_process(
        "--model-dir", tmp_path / "model", "--input", tmp_path / "in.csv", *flags, module="trainer.evaluate"
    )
    assert (result.returncode, result.stdout, result.stderr.splitlines()) == (2, "", [f"error: {message}"])


def test_a_model_dir_without_an_export_is_one_line(tmp_path):
    source = write_csv(tmp_path / "in.csv", [("fine", "pos")])
    result = run_in_process("--model-dir", tmp_path, "--input", source, module="trainer.evaluate")
    assert (result.returncode, result.stderr.splitlines()) == (
        2,
        [f"error: --model-dir: no exported model in {tmp_path} (expected saved_model.pb; point it at JOB_DIR/model)"],
    )


def test_help_answers_without_importing_tensorflow():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "trainer.evaluate", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and "--precision" in result.stdout and ".conll" in result.stdout
    assert "tensorflow" not in result.stderr
