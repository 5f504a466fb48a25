"""The line a run logs about each lower-precision copy it checked: what the check measured,
including a copy slower than float32 on the machine that wrote it (issue #37, 16)."""

FIGURES = {
    "precision": "bfloat16",
    "label_agreement": 0.995,
    "rows": 200,
    "metric": "accuracy",
    "value": 0.91,
    "float32_value": 0.915,
    "change_points": -0.5,
    "passed": True,
    "why": None,
}


def test_a_copy_slower_than_float32_is_called_slower():
    from trainer.serving.quantize import describe

    line = describe({**FIGURES, "speedup": 0.84})
    assert "0.84x float32's speed here" in line
    assert line.endswith("; written beside the float32 model, though slower than float32 on this machine")
