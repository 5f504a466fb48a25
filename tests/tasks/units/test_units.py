"""trainer/tasks/units/: every kind reads and feeds its rows through its unit."""

import pytest

from trainer import task_registry
from trainer.tasks.units import Unit


@pytest.mark.parametrize("kind", task_registry.kinds(), ids=lambda kind: kind.name)
def test_every_kind_has_a_unit_that_implements_the_whole_interface(kind):
    assert isinstance(kind.unit, Unit)


def test_the_log_says_how_each_unit_reads_a_row():
    texts, sentences = task_registry.by_name("classification").unit, task_registry.by_name("token-classification").unit
    assert texts.reads("mean") == "mean pooling"
    assert "no pooling" in sentences.reads("mean")


def test_a_taggers_onnx_copy_holds_tagging_json_and_a_text_models_nothing_more():
    assert task_registry.by_name("token-classification").unit.onnx_sidecars == ("tagging.json",)
    assert task_registry.by_name("regression").unit.onnx_sidecars == ()


def test_only_tagged_sentences_name_their_own_file_formats():
    assert "CoNLL" in task_registry.by_name("token-classification").unit.formats
    assert task_registry.by_name("multi-label").unit.formats is None
