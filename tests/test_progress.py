"""Progress lines of long loops: rows, rows/s and ETA, at most one line per interval."""

import logging

import numpy as np
import pytest

from trainer import progress


class FakeTimer:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def lines(caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "trainer"]


def test_a_line_has_rows_rate_and_eta(lines):
    timer = FakeTimer()
    meter = progress.Progress("predicted", 10, total=12_284, timer=timer)
    timer.now += 10
    meter.update(4_096)
    assert lines() == ["predicted 4,096/12,284 rows (33%)  409.6 rows/s  ETA 20s"]


def test_at_most_one_line_per_interval(lines):
    timer = FakeTimer()
    meter = progress.Progress("tokenized", 30, total=1000, timer=timer)
    for step in range(1, 101):  # 100 updates over 99 seconds
        timer.now += 0.99
        meter.update(step * 10)
    assert len(lines()) == 3 and meter.lines == 3


def test_a_loop_shorter_than_the_interval_prints_nothing(lines):
    timer = FakeTimer()
    meter = progress.Progress("tokenized", 30, total=10, timer=timer)
    timer.now += 2
    meter.update(10)
    assert lines() == []


def test_a_stream_of_unknown_length_estimates_from_the_share_read(lines):
    timer = FakeTimer()
    meter = progress.Progress("predicted", 5, timer=timer)
    timer.now += 65
    meter.update(8192, fraction=0.5)
    assert lines() == ["predicted 8,192 rows (50%)  126.0 rows/s  ETA 1m05s"]


def test_tokenizing_a_large_input_logs_progress(lines, monkeypatch):
    """One line per interval while the tokenizer runs (the interval here: every batch)."""
    import tensorflow as tf

    from trainer.data import input_pipeline
    from trainer.modeling.encoders.layers import INPUT_KEYS

    monkeypatch.setattr(input_pipeline, "_TOKENIZE_BATCH", 100)

    class Preprocessor:  # every text: 2 tokens, packed into 4
        def tokenize(self, batch):
            return tf.RaggedTensor.from_tensor(tf.ones([tf.shape(batch)[0], 2], tf.int32))

        def bert_pack_inputs(self, segments):
            return {name: tf.ones([segments[0].nrows(), 4], tf.int32) for name in INPUT_KEYS}

    preprocessor = Preprocessor()
    split = input_pipeline.tokenize(np.array(["a text"] * 500, dtype=object), preprocessor, log_every_seconds=1e-9)
    assert len(split) == 500
    assert [line.split("  ")[0] for line in lines()] == [
        f"tokenized {n}/500 rows ({n // 5}%)" for n in (100, 200, 300, 400, 500)
    ]


def test_evaluation_prints_progress_lines_from_the_batches_predicted(lines):
    from trainer.training.callbacks import PredictionProgress

    timer = FakeTimer()
    meter = PredictionProgress("evaluating validation", 10, rows=2_000, batches=16, timer=timer)
    for batch in range(16):
        timer.now += 2.5
        meter.on_predict_batch_end(batch)
    assert lines() == [
        "evaluating validation 500/2,000 rows (25%)  50.0 rows/s  ETA 30s",
        "evaluating validation 1,000/2,000 rows (50%)  50.0 rows/s  ETA 20s",
        "evaluating validation 1,500/2,000 rows (75%)  50.0 rows/s  ETA 10s",
        "evaluating validation 2,000/2,000 rows (100%)  50.0 rows/s  ETA 0s",
    ]


def test_under_one_row_a_second_the_line_says_seconds_per_row():
    """Issue #49: explaining on a large encoder logged "0.0 rows/s"."""
    from trainer.progress import rate

    assert rate(2, 25.0) == "12.5 s/row"
    assert rate(100, 2.0) == "50.0 rows/s"
    assert rate(0, 5.0) == "0.0 rows/s"
