"""What a run learns to predict: one task object owns the label dtype, the head's output, the loss,
the metrics of a split, the validation metrics tracked per epoch and the exported outputs.

Modelled on TF Model Garden's sentence-prediction task (official/nlp/tasks/sentence_prediction.py),
where classification and regression sit behind one interface. Chosen once from the config.
"""
from typing import Optional

from trainer.config import Config, task_name


def from_config(config: Config):
    """The task object of a run (--task, 'auto' resolved)."""
    return by_name(task_name(config))


def by_name(name: Optional[str]):
    """The task object of a task name, as metrics.json records it (None: a run from before
    there were other tasks than classification)."""
    if name == "regression":
        from trainer.tasks.regression import RegressionTask
        return RegressionTask()
    if name == "multi-label":
        from trainer.tasks.multilabel import MultiLabelTask
        return MultiLabelTask()
    from trainer.tasks.classification import ClassificationTask
    return ClassificationTask()
