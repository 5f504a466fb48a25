"""`python -m trainer.report` on a finished tiny run, the way a user runs it; report.html in a real
headless browser; the calibrated export."""

import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from matplotlib import image as mpimg
from test_task import run_cli, train_args

FIGURES = ("learning_curves.png", "confusion_validation.png", "confusion_test.png", "per_class.png", "reliability.png")


@pytest.fixture(scope="module")
def reported(tiny_encoder_dir, tiny_data, tmp_path_factory):
    """A finished tiny run whose report `trainer.report` (re)built, listing up to 7 errors and 3
    least confident correct predictions per split."""
    job_dir = tmp_path_factory.mktemp("report") / "job"
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, job_dir, "--epochs", "3"))
    assert result.returncode == 0, result.stdout + result.stderr
    result = run_cli("--job-dir", job_dir, "--report-errors", "7", "--report-correct", "3", module="trainer.report")
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir, result


@pytest.mark.slow  # a run trained and reported for it (CI's slow line)
def test_report_writes_the_page_the_figures_the_errors_and_the_card(reported):
    job_dir, result = reported
    for name in ("report.html", "errors.csv", "MODEL_CARD.md", *(f"report/{f}" for f in FIGURES)):
        assert (job_dir / name).stat().st_size > 0, name
    assert "Traceback" not in result.stderr and "WARNING" not in result.stdout


@pytest.mark.slow  # a run trained and reported for it (CI's slow line)
@pytest.mark.parametrize("figure", FIGURES)
def test_every_figure_is_a_non_blank_image(reported, figure):
    pixels = mpimg.imread(reported[0] / "report" / figure)
    assert pixels.shape[0] >= 300 and pixels.shape[1] >= 600
    assert pixels[..., :3].std() > 0.05


def exported_losses(job_dir, path):
    """(texts, losses, misclassified) of a data file under the run's exported model, computed
    here directly."""
    from trainer.serving import export

    serve = export.load(str(job_dir / "model"))
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = serve(text=np.array([r["text"] for r in rows], dtype=object))
    names = [n.decode() for n in out["label_names"].numpy()[0]]
    true = np.array([names.index(r["label"]) for r in rows])
    probabilities = out["probabilities"].numpy().astype(np.float64)
    return (
        [r["text"] for r in rows],
        -np.log(probabilities[np.arange(len(rows)), true]),
        probabilities.argmax(axis=1) != true,
    )


@pytest.mark.slow  # a run trained and reported for it (CI's slow line)
@pytest.mark.parametrize("split", ["validation", "test"])
def test_errors_csv_holds_the_highest_loss_errors_then_the_least_confident_correct_rows(reported, tiny_data, split):
    """Issue #23, 7: errors only, then (asked for) correct rows, each marked as such."""
    with open(reported[0] / "errors.csv", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["split"] == split]
    texts, losses, wrong = exported_losses(reported[0], tiny_data[split])
    for outcome, chosen, count in (("error", wrong, 7), ("correct", ~wrong, 3)):
        listed = np.array([float(r["loss"]) for r in rows if r["outcome"] == outcome])
        np.testing.assert_allclose(listed, np.sort(losses[chosen])[::-1][:count], rtol=1e-4, atol=1e-6)
    assert [r["outcome"] for r in rows] == sorted((r["outcome"] for r in rows), key=["error", "correct"].index)
    for row in rows:
        i = texts.index(row["text"])
        assert float(row["loss"]) == pytest.approx(losses[i], rel=1e-4, abs=1e-6)
        assert wrong[i] == (row["outcome"] == "error")


@pytest.mark.slow  # a run trained and reported for it (CI's slow line)
def test_model_card_reports_the_runs_test_metrics(reported):
    job_dir = reported[0]
    metrics = json.loads((job_dir / "metrics.json").read_text())
    card = (job_dir / "MODEL_CARD.md").read_text()
    assert f"Accuracy {metrics['test']['accuracy']:.4f}" in card
    assert f"python -m trainer.predict --model-dir {job_dir}/model" in card


@pytest.mark.slow
def test_a_run_without_a_calibration_block_gets_a_temperature_fitted_by_the_report(reported, tmp_path):
    job_dir = shutil.copytree(reported[0], tmp_path / "copy", ignore=shutil.ignore_patterns("checkpoints"))
    metrics = json.loads((job_dir / "metrics.json").read_text())
    metrics.pop("calibration", None)  # a run from before calibration existed
    (job_dir / "metrics.json").write_text(json.dumps(metrics))
    result = run_cli("--job-dir", job_dir, module="trainer.report")
    assert result.returncode == 0, result.stdout + result.stderr
    card = (job_dir / "MODEL_CARD.md").read_text()
    assert "fitted by `trainer.report`" in card and "does **not** apply it" in card


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_the_report_uses_the_temperature_the_run_recorded(reported, tmp_path):
    job_dir = shutil.copytree(reported[0], tmp_path / "copy", ignore=shutil.ignore_patterns("checkpoints"))
    metrics = json.loads((job_dir / "metrics.json").read_text())
    scores = {key: 0.5 for key in ("ece_before", "ece_after", "brier_before", "brier_after", "nll_before", "nll_after")}
    metrics["calibration"] = {
        "temperature": 2.345,
        "at_bound": False,
        "applied": False,
        "bins": 15,
        "validation": scores,
        "test": scores,
    }
    (job_dir / "metrics.json").write_text(json.dumps(metrics))
    result = run_cli("--job-dir", job_dir, module="trainer.report")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "T = 2.345" in (job_dir / "MODEL_CARD.md").read_text()
    assert "T = 2.345" in (job_dir / "report.html").read_text()


@pytest.mark.slow  # a run trained and reported for it (CI's slow line)
def test_the_run_builds_its_report_before_writing_metrics_json(reported, tmp_path):
    """The training run's last stage: the report from the metrics it is about to write, so a
    run killed in between never looks finished without its report."""
    from trainer.reporting.build import build_report

    job_dir = shutil.copytree(reported[0], tmp_path / "run", ignore=shutil.ignore_patterns("checkpoints"))
    metrics = json.loads((job_dir / "metrics.json").read_text())
    for name in ("metrics.json", "report.html", "errors.csv", "MODEL_CARD.md"):
        (job_dir / name).unlink()
    shutil.rmtree(job_dir / "report")
    build_report(str(job_dir), metrics=metrics)
    assert (job_dir / "report.html").exists() and (job_dir / "report" / "reliability.png").exists()
    assert not (job_dir / "metrics.json").exists()


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_an_unfinished_run_is_refused_with_one_clear_line(reported, tmp_path):
    job_dir = tmp_path / "unfinished"
    job_dir.mkdir()
    shutil.copy(reported[0] / "config.json", job_dir)
    result = run_cli("--job-dir", job_dir, module="trainer.report")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --job-dir: {job_dir} holds no finished run (no metrics.json): its run stopped before "
        f"its first checkpoint, so there is nothing to report or resume; rerun trainer.task"
    ]
    assert not (job_dir / "report.html").exists()


def test_help_answers_without_importing_tensorflow():
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "trainer.report", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and "--job-dir" in result.stdout
    assert "tensorflow" not in result.stderr


@pytest.mark.slow  # an export traced for it (CI's slow line)
def test_a_calibrated_export_divides_its_logits_by_the_temperature(tiny_encoder_dir, tmp_path):
    import tensorflow as tf

    from trainer.modeling import encoders, heads
    from trainer.serving import export

    encoder = encoders.load_encoder(tiny_encoder_dir, seq_length=16)
    classifier = heads.build_classifier(encoder.network, 3, "cls", 0.0)
    head = classifier.get_layer("logits")  # confident, distinct logits instead of near-zero ones
    head.kernel.assign(np.random.default_rng(0).normal(0, 1.0, head.kernel.shape))
    texts = tf.constant(["i love this movie", "so bad", "meh", "a movie ?"])
    served = {}
    for temperature in (1.0, 2.5):
        module = export.ServingModule(encoder.preprocessor, classifier, ["a", "b", "c"], 16, temperature)
        export.export(module, str(tmp_path / f"t{temperature}"))
        served[temperature] = export.load(str(tmp_path / f"t{temperature}"))(text=texts)
    plain, calibrated = served[1.0]["probabilities"].numpy(), served[2.5]["probabilities"].numpy()
    logits = np.log(plain)
    expected = np.exp(logits / 2.5) / np.exp(logits / 2.5).sum(axis=1, keepdims=True)
    assert not np.allclose(calibrated, plain, atol=1e-3)
    np.testing.assert_allclose(calibrated, expected, atol=1e-5)
    np.testing.assert_array_equal(served[2.5]["label_index"].numpy(), served[1.0]["label_index"].numpy())


CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture
def browser(tmp_path):
    """Debian's headless Chromium driven through its ChromeDriver, console messages recorded."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed (apt-get install -y chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # Without the background-networking flags Chromium keeps trying Google's hosts, which this
    # offline machine refuses.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.mark.slow  # a run trained and reported for it (CI's slow line)
def test_report_html_renders_in_a_browser_with_every_image_and_no_console_error(reported, browser):
    browser.get((reported[0] / "report.html").as_uri())
    images = browser.execute_script(
        "return Array.from(document.images, i => [i.complete, i.naturalWidth, i.src.slice(0, 22)])"
    )
    assert len(images) == len(FIGURES)
    assert all(complete and width > 0 and src == "data:image/png;base64," for complete, width, src in images)
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    headers = browser.execute_script("return Array.from(document.querySelectorAll('th'), h => h.textContent)")
    assert "outcome" in headers  # the worst-errors table is there
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []


@pytest.mark.slow  # a tagger trained and its export read twice (CI's slow line)
def test_report_rebuilds_a_taggers_errors_as_its_run_wrote_them(tiny_encoder_dir, tmp_path):
    """Issue #64: trainer.report refused taggers, and only after predicting every held-out
    sentence. It reads the export's words where they meet the tagged file's (the run's own
    errors.csv scored the trained model's tokens)."""
    import random

    from test_tagging import args as tagging_args
    from test_tagging import tagged_sentence, write_conll

    rng = random.Random(3)
    data = {
        name: write_conll(tmp_path / f"{name}.conll", [tagged_sentence(rng) for _ in range(count)])
        for name, count in (("train", 40), ("validation", 16))
    }
    job_dir = tmp_path / "job"
    result = run_cli(*tagging_args(tiny_encoder_dir, data, job_dir, "--epochs", "2", "--mixed-precision", "off"))
    assert result.returncode == 0, result.stdout + result.stderr
    written = (job_dir / "errors.csv").read_text()
    (job_dir / "errors.csv").unlink()
    (job_dir / "report.html").unlink()
    result = run_cli("--job-dir", job_dir, module="trainer.report")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (job_dir / "errors.csv").read_text() == written
    assert (job_dir / "report.html").exists() and (job_dir / "report" / "entity_types.png").exists()
