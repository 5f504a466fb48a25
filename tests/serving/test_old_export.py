"""An export written by an earlier version keeps loading, predicting and serving.

tests/fixtures/export-2026-11-28/ is a tiny classifier's job dir (model/ with its int8 copy,
metrics.json, config.json) exported by the version of 2026-11-28, before the encoder blocks,
tokenizers and tasks were moved into their own modules (issue #50), with what it predicted
then (expected.json). Users' exports of that time must work unchanged: trainer.predict and
trainer.serve read them as they are, and a rerun may replace one.
"""

import json
import pathlib
import shutil

import numpy as np
import pytest
from conftest import FIXTURES, read_csv, write_csv
from test_predict import run_cli
from test_server import HEALTH, PREDICT, Server, environ, free_port, post

FIXTURE = pathlib.Path(FIXTURES) / "export-2026-11-28"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())


def test_the_old_export_loads_and_predicts_what_it_predicted_then():
    import tensorflow as tf

    from trainer.serving import export

    outputs = export.load(str(FIXTURE / "model"))(text=tf.constant(EXPECTED["texts"]))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), EXPECTED["float32"]["probabilities"], atol=1e-5)
    assert [label.decode() for label in outputs["label"].numpy()] == EXPECTED["float32"]["labels"]


def test_trainer_predict_reads_the_old_export_through_its_int8_copy(tmp_path):
    """The int8 copy loads the old float32 export too (its signature and tokenizer)."""
    texts = write_csv(tmp_path / "texts.csv", [(text,) for text in EXPECTED["texts"]], ("text",))
    output = tmp_path / "int8.csv"
    result = run_cli(
        "trainer.predict", "--model-dir", FIXTURE / "model", "--input", texts, "--output", output, "--precision", "int8"
    )
    assert result.returncode == 0, result.stderr
    labels = [row["predicted_label"] for row in read_csv(output)]
    assert np.mean(np.array(labels) == EXPECTED["float32"]["labels"]) >= 0.8


@pytest.mark.slow  # CI's slow line (.ci/run's SLOW_CI_TESTS)
def test_trainer_serve_answers_with_the_old_export(tmp_path):
    port = free_port()
    env = {
        **environ(),
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": HEALTH,
        "AIP_PREDICT_ROUTE": PREDICT,
        "AIP_STORAGE_URI": str(FIXTURE / "model"),
    }
    running = Server(["--precision", "float32"], env, HEALTH, tmp_path / "server.log")
    try:
        response = post(running.wait_ready(port), {"instances": EXPECTED["texts"]})
    finally:
        running.stop()
    assert response.status_code == 200, response.text
    assert [p["label"] for p in response.json()["predictions"]] == EXPECTED["float32"]["labels"]


def test_a_rerun_may_replace_the_old_export(tmp_path):
    from trainer.serving import model_dir

    copied = tmp_path / "model"
    shutil.copytree(FIXTURE / "model", copied)
    model_dir.check_replaceable(str(copied))
