"""What a run learns to predict (--task): the registry of task kinds.

Each kind is a class in its own folder (trainer/tasks/<kind>/, its interface in base.py) and one
entry of KINDS below. Everything that differs by task kind is a method or attribute of its
object: the rest of the package asks `from_config(config)` for a run's task, or `by_name(name)`
for a finished run's (metrics.json's `task`), or `of_export(outputs)` for a loaded export's (told
by its signature's outputs), and never compares a name.
"""

from trainer.tasks.base import Task
from trainer.tasks.classification import ClassificationTask
from trainer.tasks.multilabel import MultiLabelTask
from trainer.tasks.regression import RegressionTask
from trainer.tasks.tagging import TaggingTask

# The task kinds, in --task's order; the first is what --task auto trains on a file no other
# kind claims (Task.claims), and what a run from before there were other tasks trained.
KINDS = (ClassificationTask, RegressionTask, MultiLabelTask, TaggingTask)

NAMES = tuple(kind.name for kind in KINDS)
AUTO = "auto"
CHOICES = (AUTO, *NAMES)  # --task's choices
# Every validation metric some task can select the best epoch by, with its direction: early
# stopping, the exported weights and Vertex hyperparameter tuning (trainer.submit's metric
# spec, the trainer's reports, trainer.tune's study) all read this one table.
METRIC_GOALS = {metric: goal for kind in KINDS for metric, goal in kind.metric_goals.items()}


def by_name(name: str | None) -> Task:
    """A fresh task object of a task name (--task's value, or metrics.json's `task`; None: a run
    from before there were other tasks than classification)."""
    if name in (None, AUTO):
        return KINDS[0]()
    return {kind.name: kind for kind in KINDS}[name]()


# --selection-metric of --task auto (each task's own default replaces it: config's _apply_task_defaults),
# and the metric a tuning job's trials report by default (trainer.vertex.hypertune).
DEFAULT_METRIC = by_name(AUTO).default_metric


def auto_task(training_file: str | None) -> str | None:
    """The name of the kind --task auto trains on `training_file` when a kind claims it (tagged
    sentences), else None: the first kind's, as ever."""
    if not training_file:
        return None
    return next((kind.name for kind in KINDS[1:] if kind.claims(training_file)), None)


def from_config(config) -> Task:
    """The task object of a run (--task, 'auto' resolved)."""
    return by_name(config.model.task)


def of_export(output_names) -> Task:
    """A fresh task object of a loaded export whose signature returns `output_names`: the kind
    that recognizes them (Task.recognizes, its export_mark). An export none recognizes is
    classification's, as by_name(None): the only kind of the earliest exports."""
    return next((kind for kind in KINDS if kind.recognizes(output_names)), KINDS[0])()
