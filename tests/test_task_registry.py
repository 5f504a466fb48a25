"""trainer/task_registry.py: where the package asks for a task kind."""

import pytest

from trainer import task_registry


def test_the_kinds_are_registered_in_tasks_order():
    assert task_registry.names() == ("classification", "regression", "multi-label", "token-classification", "embedding")
    assert task_registry.choices()[0] == task_registry.AUTO


def test_a_second_kind_of_a_registered_name_is_refused():
    before = task_registry.kinds()
    with pytest.raises(ValueError, match="classification"):
        task_registry.register(task_registry.kinds()[0])
    assert task_registry.kinds() == before


def test_every_metric_some_kind_selects_by_has_one_direction():
    goals = task_registry.metric_goals()
    assert goals["val_loss"] == "minimize"
    assert goals["val_f1"] == "maximize" and goals["val_spearman"] == "maximize"


def test_the_metrics_of_a_kinds_variants_are_selectable_too():
    assert task_registry.metric_goals()["val_mrr_at_10"] == "maximize"  # embeddings of unscored pairs


def test_the_losses_are_auto_then_each_kinds_own_once():
    losses = task_registry.losses()
    assert losses[0] == "auto" and len(set(losses)) == len(losses) and "multiple-negatives" in losses


def test_an_onnx_copy_is_a_taggers_where_its_tagging_json_is(tmp_path):
    assert task_registry.of_onnx_copy(str(tmp_path)).name == "classification"
    (tmp_path / "tagging.json").write_text("{}")
    assert task_registry.of_onnx_copy(str(tmp_path)).name == "token-classification"
