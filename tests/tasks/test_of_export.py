"""A loaded export's task kind is told by its signature's outputs (trainer.task_registry.of_export)."""

import pytest

from trainer import task_registry

# The signature outputs each kind's export returns (its serving_outputs' keys), in every version
# since tests/fixtures/export-2026-11-28/.
OUTPUTS = {
    "classification": {"probabilities", "label", "label_index", "label_names"},
    "regression": {"score"},
    "multi-label": {"probabilities", "labels", "predicted", "label_names"},
}


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_each_kinds_export_is_told_by_its_outputs(name):
    assert task_registry.of_export(OUTPUTS[name]).name == name


def test_an_export_no_kind_recognizes_is_read_as_the_first_kinds():
    """As by_name(None): the exports from before there were other kinds than the first."""
    assert type(task_registry.of_export({"probabilities", "label_names"})) is task_registry.kinds()[0]
