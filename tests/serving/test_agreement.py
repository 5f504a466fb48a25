"""The check a faster copy of a model must pass before it is written: its decisions agree with
float32 on 99% of validation rows, and the task's metric moves by at most 0.5 point."""

import numpy as np
import pytest

from trainer import task_registry
from trainer.errors import UserError
from trainer.serving import agreement, variants


def probabilities(classes):
    """One-hot class probabilities: row i decides classes[i]."""
    out = np.full((len(classes), 3), 0.1)
    out[np.arange(len(classes)), classes] = 0.8
    return out


LABELS = np.arange(1000) % 3
CLASSIFICATION = task_registry.by_name("classification")


def test_a_copy_deciding_as_float32_on_995_of_1000_rows_passes():
    candidate = LABELS.copy()
    candidate[:5] = (candidate[:5] + 1) % 3
    check = agreement.compare(CLASSIFICATION, probabilities(LABELS), probabilities(candidate), LABELS, ["a", "b", "c"])
    assert check["passed"] and check["why"] is None
    assert check["label_agreement"] == pytest.approx(0.995)
    assert check["change_points"] == pytest.approx(-0.5)


def test_a_copy_agreeing_on_98_percent_is_refused_with_the_reason():
    candidate = LABELS.copy()
    candidate[:20] = (candidate[:20] + 1) % 3
    check = agreement.compare(CLASSIFICATION, probabilities(LABELS), probabilities(candidate), LABELS, ["a", "b", "c"])
    assert not check["passed"]
    assert "labels agree with float32 on 98.00% of validation rows (needs 99%)" in check["why"]


def test_a_metric_moving_more_than_half_a_point_is_refused_even_at_99_percent_agreement():
    candidate = LABELS.copy()
    candidate[:6] = (candidate[:6] + 1) % 3
    check = agreement.compare(CLASSIFICATION, probabilities(LABELS), probabilities(candidate), LABELS, ["a", "b", "c"])
    assert check["label_agreement"] == pytest.approx(0.994)
    assert not check["passed"]
    assert check["why"] == "accuracy moves -0.60 points (at most 0.5 allowed)"


def test_multi_label_rows_agree_only_when_their_whole_label_set_does():
    labels = np.array([[1, 0], [0, 1], [1, 1], [0, 0]] * 50)
    candidate = labels.copy()
    candidate[0] = [1, 1]  # one label of one row
    check = agreement.compare(task_registry.by_name("multi-label"), labels, candidate, labels, ["x", "y"])
    assert check["label_agreement"] == pytest.approx(199 / 200)
    assert check["metric"] == "micro_f1"


def test_regression_is_checked_on_its_metric_alone():
    labels = np.linspace(0, 5, 200)
    check = agreement.compare(task_registry.by_name("regression"), labels, labels[::-1].copy(), labels, [])
    assert check["label_agreement"] is None and check["metric"] == "spearman"
    assert not check["passed"] and "spearman moves -200.00 points" in check["why"]


def timed(**speedups):
    """precisions.json's entries of passed checks that timed each copy at these speedups."""
    return {precision: {"passed": True, "speedup": speedup} for precision, speedup in speedups.items()}


@pytest.mark.parametrize(
    "native, held, checks, expected",
    [
        (True, ("float32", "bfloat16"), timed(bfloat16=1.4), "bfloat16"),
        (False, ("float32", "bfloat16"), timed(bfloat16=1.4), "float32"),  # emulated: slower than float32
        (True, ("float32",), {}, "float32"),
        (True, ("float32", "int8", "bfloat16"), timed(int8=1.9, bfloat16=1.4), "int8"),
        (True, ("float32", "int8", "bfloat16"), timed(int8=1.2, bfloat16=1.4), "bfloat16"),
        (False, ("float32", "int8"), timed(int8=1.9), "int8"),
    ],
)
def test_auto_takes_the_copy_its_check_timed_fastest_bfloat16_only_where_native(native, held, checks, expected):
    assert variants.choose("auto", held, native, "m", checks)[0] == expected


@pytest.mark.parametrize("speedup, expected", [(0.99, "float32"), (1.05, "float32"), (1.1, "int8"), (1.9, "int8")])
def test_auto_takes_a_copy_only_from_the_speedup_its_check_timed(speedup, expected):
    """Issue #64: an int8 copy timed at 0.99x float32's speed was loaded by default."""
    assert variants.choose("auto", ("float32", "int8"), False, "m", timed(int8=speedup))[0] == expected


def test_auto_says_why_it_keeps_float32():
    precision, why = variants.choose(
        "auto", ("float32", "int8", "bfloat16"), False, "m", timed(int8=0.99, bfloat16=1.4)
    )
    assert precision == "float32"
    assert why == (
        "the int8 copy measured 0.99x float32's speed at export (auto needs 1.10x); the "
        "bfloat16 copy is slower than float32 on a CPU without native bfloat16 (AMX, "
        "AVX512_BF16)"
    )


def test_auto_says_which_copy_it_takes_and_why():
    assert variants.choose("auto", ("float32", "int8"), False, "m", timed(int8=1.96)) == (
        "int8",
        "the int8 copy measured 1.96x float32's speed at export",
    )


REFUSED = {
    "int8": {
        "written": False,
        "passed": False,
        "speedup": 2.0,
        "why": "entities agree with float32 at 96.41% F1 on validation rows (needs 99%)",
    }
}


def test_auto_says_a_copy_was_refused_by_its_check():
    assert variants.choose("auto", ("float32",), False, "m", REFUSED) == (
        "float32",
        "the int8 copy was refused by its check: entities agree with float32 at 96.41% "
        "F1 on validation rows (needs 99%)",
    )


def test_asking_for_a_copy_its_check_refused_says_so_and_names_no_command():
    """Issue #64: the hint named trainer.export_quantized, which refuses the copy again."""
    with pytest.raises(UserError) as raised:
        variants.choose("int8", ("float32",), False, "m", REFUSED)
    assert str(raised.value) == (
        "--precision int8: m holds no int8 model (it holds float32); its check refused it, not "
        "written: entities agree with float32 at 96.41% F1 on validation rows (needs 99%)"
    )


@pytest.mark.parametrize("precision, held", [("bfloat16", ("float32",)), ("int8", ("float32", "bfloat16"))])
def test_asking_for_a_precision_the_dir_lacks_names_what_it_holds_and_what_writes_it(precision, held):
    with pytest.raises(
        UserError,
        match=rf"--precision {precision}: m holds no {precision} model "
        rf"\(it holds {', '.join(held)}\); python -m "
        rf"trainer.export_quantized --model-dir m --precision "
        rf"{precision} writes it",
    ):
        variants.choose(precision, held, True, "m")


def test_a_copy_that_cannot_be_made_is_said_instead_of_a_command_that_would_fail():
    """Issue #49, 3: for a windows model predict suggested export_quantized, which crashed."""
    why = variants.unsupported("int8", "native", "windows")
    with pytest.raises(
        UserError,
        match=r"--precision int8: m holds no int8 model \(it holds "
        r"float32\); none can be made: --long-texts windows: ",
    ):
        variants.choose("int8", ("float32",), True, "m", {"int8": {"written": False, "why": why}})


@pytest.mark.parametrize(
    "precision, backend, long_texts, refused",
    [
        ("int8", "native", "windows", True),
        ("int8", "hub", "truncate", False),
        ("bfloat16", "hub", "truncate", True),
        ("bfloat16", "native", "windows", False),
    ],
)
def test_only_int8_of_windows_and_bfloat16_of_hub_encoders_cannot_be_made(precision, backend, long_texts, refused):
    assert (variants.unsupported(precision, backend, long_texts) is not None) == refused
