"""The task kinds (--task), each a class in its own folder (trainer/tasks/<kind>/, its interface
in base.py), registered here in --task's order (trainer/task_registry.py, where the rest of the
package asks for one: by `from_config(config)`, `by_name(name)` or `of_export(outputs)`, never by
comparing a name). The first is what --task auto trains on a file no other kind claims
(Task.claims), and what a run from before there were other tasks trained.
"""

from trainer import task_registry
from trainer.tasks.classification import ClassificationTask
from trainer.tasks.embedding import EmbeddingTask
from trainer.tasks.multilabel import MultiLabelTask
from trainer.tasks.regression import RegressionTask
from trainer.tasks.tagging import TaggingTask

for _kind in (ClassificationTask, RegressionTask, MultiLabelTask, TaggingTask, EmbeddingTask):
    task_registry.register(_kind)
