"""A tagger exported before windows, `words` and control characters as separators (issue #64)
keeps loading, predicting and serving as it did.

tests/fixtures/tagger-export-2026-12-01/ is a tiny tagger's job dir (model/ with its int8 copy,
metrics.json, config.json) trained and exported by the version of 2026-12-01 (1eafc62) at
--max-seq-length 32, with what trainer.predict answered then (expected.json): `entities` and
`tags` of six texts, one longer than 32 tokens (its end is not read), one with a word without
pieces (U+200D), one with a NUL (its words after it are not read) and an empty one. Its graph
still cuts those texts as it did, and the answers are read from its outputs as before: no
`words`, which its outputs cannot give.
"""

import json
import pathlib

import pytest
from conftest import FIXTURES
from test_task import run_in_process

FIXTURE = pathlib.Path(FIXTURES) / "tagger-export-2026-12-01"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())


def assert_answered_as_then(answers: list, expected: list) -> None:
    """Every entity (text, label, offsets) and tag as then; each entity's score within 1e-5: the
    export was written on a Xeon, and float rounding differs in its last bits on another CPU."""
    scores = lambda rows: [e.pop("score") for row in rows for e in (row["entities"] or [])]  # noqa: E731
    answers, expected = json.loads(json.dumps(answers)), json.loads(json.dumps(expected))
    assert scores(answers) == pytest.approx(scores(expected), abs=1e-5)
    assert answers == expected


@pytest.mark.parametrize("precision", ["float32", pytest.param("int8", marks=pytest.mark.slow)])  # int8: CI's slow line
def test_trainer_predict_answers_as_it_did_then(tmp_path, precision):
    source, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in EXPECTED["texts"]))
    result = run_in_process(
        "--model-dir",
        FIXTURE / "model",
        "--input",
        source,
        "--output",
        output,
        "--precision",
        precision,
        module="trainer.predict",
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert [sorted(row) for row in rows] == [["entities", "note", "tags", "text"]] * len(rows)
    assert_answered_as_then([{"entities": row["entities"], "tags": row["tags"]} for row in rows], EXPECTED[precision])


def test_the_servers_batch_function_answers_as_it_did_then():
    from trainer.serving import export, protocol

    answers, _ = protocol.predict_instances(export.load(str(FIXTURE / "model")), EXPECTED["texts"], 8)
    assert_answered_as_then(answers[:-1], EXPECTED["float32"][:-1])
    assert answers[-1] == {"entities": None, "tags": None, "note": "empty text: no prediction"}
