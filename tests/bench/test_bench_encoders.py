"""bench/encoders.py's table: every encoder's training and prediction speed as a ratio to the
default encoder's in the same run, with the mean tokens per row each was measured on."""

import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import encoders  # noqa: E402


def _measured(train, predict, tokens=25.0):
    return {
        "layers": 12,
        "hidden": 768,
        "parameters": 124.6e6,
        "mean_tokens": tokens,
        "examples_per_second": train,
        "predict_examples_per_second": predict,
    }


def test_both_ratios_are_against_the_first_row_the_default_encoder():
    rows = encoders.rows({"default": _measured(100.0, 400.0), "roberta-base": _measured(25.0, 200.0, 31.5)})
    assert rows[0][-4:] == ["100.0", "1.00x", "400.0", "1.00x"]
    assert rows[1][4:] == ["31.5", "25.0", "0.25x", "200.0", "0.50x"]
