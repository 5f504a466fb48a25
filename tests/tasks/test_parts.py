"""A kind is a core plus optional parts (trainer/tasks/parts/): each part an object of its shared
class, or None where the kind cannot do it, and a flag needing a part the kind lacks refused in
one line built from the absence."""

import pathlib

import pytest

from trainer import task_registry
from trainer.errors import UserError
from trainer.tasks import parts
from trainer.tasks.parts import attribution, label_quality, teacher_targets, temperature, threshold

PART_CLASSES = {
    "operating_point": threshold.OperatingPoint,
    "calibration": temperature.Calibration,
    "label_issues": label_quality.LabelIssues,
    "explanations": attribution.Explanations,
    "distillation": teacher_targets.Distillation,
}
HELD = {
    "classification": {"operating_point", "calibration", "label_issues", "explanations", "distillation"},
    "regression": {"explanations", "distillation"},
    "multi-label": {"operating_point", "label_issues", "explanations", "distillation"},
    "token-classification": {"distillation"},
    "embedding": {"distillation"},
}


@pytest.mark.parametrize("name", task_registry.names())
def test_each_kind_holds_its_parts_and_none_for_the_others(name):
    task = task_registry.by_name(name)
    held = {part for part in PART_CLASSES if getattr(task, part) is not None}
    assert held == HELD[name]
    for part in held:
        assert isinstance(getattr(task, part), PART_CLASSES[part]) and getattr(task, part).task is task


def test_a_kind_states_what_it_cannot_do_by_absence_alone_not_by_refusal_strings():
    assert [(kind.name, a) for kind in task_registry.kinds() for a in dir(kind()) if a.endswith("_refused")] == []


def test_two_objects_of_a_kind_do_not_share_parts():
    """A part reads and sets its own task's state (a chosen threshold, the label count)."""
    first, second = task_registry.by_name("multi-label"), task_registry.by_name("multi-label")
    assert first.operating_point is not second.operating_point
    assert second.distillation.task is second


@pytest.mark.parametrize(
    ("name", "part", "flag", "line"),
    [
        (
            "regression",
            "operating_point",
            "--target-recall",
            "--target-recall: needs a binary or multi-label task; --task regression has no yes/no "
            "decision a threshold can move",
        ),
        (
            "token-classification",
            "label_issues",
            "--find-label-issues",
            "--find-label-issues: needs classes or labels; --task token-classification has no class "
            "or label per row for cleanlab's ranking to judge",
        ),
        (
            "token-classification",
            "explanations",
            '{"explain": true}',
            '{"explain": true}: needs a model answering for a whole text; --task '
            "token-classification has no answer for a whole text to attribute to its words",
        ),
    ],
)
def test_a_flag_needing_a_part_the_kind_lacks_is_refused_naming_the_flag_the_task_and_the_lack(name, part, flag, line):
    with pytest.raises(UserError) as refused:
        parts.require(task_registry.by_name(name), part, flag)
    assert str(refused.value) == line


def test_a_part_the_kind_has_is_given_to_the_caller():
    task = task_registry.by_name("classification")
    assert parts.require(task, "label_issues", "--find-label-issues") is task.label_issues


def test_a_three_class_classifier_refuses_a_target_in_the_same_template_with_its_reason():
    task = task_registry.by_name("classification")
    with pytest.raises(UserError) as refused:
        task.operating_point.check(["a", "b", "c"], "--target-precision")
    assert str(refused.value) == (
        "--target-precision: needs a binary or multi-label task; this classifier has 3 classes "
        "(a, b, c), and a threshold picks between two"
    )


def test_every_part_a_kind_can_lack_has_its_refusal_words():
    """Calibration refuses nothing (--calibrate is on by default): every other part, lacked by
    some kind, says what it needs and what its absence lacks."""
    lacked = {part for name in task_registry.names() for part in PART_CLASSES if part not in HELD[name]}
    assert lacked - {"calibration"} <= set(parts.NEEDS)
    assert set(parts.NEEDS) <= set(PART_CLASSES)


def test_adding_a_task_counts_the_core_every_kind_defines():
    """docs/adding-a-task.md states the core's size: the attributes Task declares without a
    value that a text kind must set (TextTask sets its unit) and the abstract methods of a text
    kind."""
    from conftest import ROOT

    from trainer.tasks.base import Task, TextTask

    attributes = [name for name in Task.__annotations__ if not hasattr(TextTask, name)]
    core = len(attributes) + len(TextTask.__abstractmethods__)
    page = pathlib.Path(ROOT, "docs", "adding-a-task.md").read_text()
    assert f"**{core} methods and attributes every kind defines**" in page


def test_adding_a_task_counts_what_a_unit_defines():
    """docs/adding-a-task.md, section 7, states what a new unit writes: Unit's abstract members."""
    from conftest import ROOT

    from trainer.tasks.units import Unit

    page = pathlib.Path(ROOT, "docs", "adding-a-task.md").read_text()
    assert f"**the unit's {len(Unit.__abstractmethods__)} abstract methods and properties**" in page.replace("\n", " ")
