"""A run's validation and test predictions as the report reads them (SplitPredictions, of
trainer.inference.split_predictions: each task makes its own).

The training run hands over the outputs it computed its metrics from (Task.split_predictions):
the end of a run predicts each split once. `trainer.report` on a finished run recomputes them
with the exported model (`recompute`): its outputs turned back into the model's
(Task.outputs_of_export) and decided as the export decides (Task.decide_as), as
`trainer.evaluate` scores an export on a labelled file.

The data comes back from config.json alone: `load_datasets` re-reads and re-splits it exactly
as training did (seeded).
"""

import logging

from trainer.errors import UserError

log = logging.getLogger("trainer")


def temperature_of(module) -> float:
    """A loaded export's temperature: 1 for a task without one, or an export from before
    calibration; an int8 model's is its float32 export's."""
    module = getattr(module, "float32", module)
    return float(module.temperature.numpy()) if hasattr(module, "temperature") else 1.0


def decide_as_export(task, module) -> float:
    """`task` told a loaded export's decisions and temperature (Task.decide_as), so that what
    it computes of the export's outputs is decided as the export decides; returns the
    temperature."""
    reference = getattr(module, "float32", module)  # an int8 model's: its float32 export's
    temperature = temperature_of(reference)
    task.decide_as(task.decisions_of_export(reference), temperature)
    return temperature


def check_names(names, label_names, model_dir: str) -> None:
    if list(names) != list(label_names):
        raise UserError(f"{model_dir}: the model's labels {list(names)} are not the run's {list(label_names)}")


def recompute(config, model_dir: str, label_names, task) -> dict:
    """{"validation": ..., "test": ...} (test when the run had one) from the exported model of a
    `task` run."""
    from trainer.inference import loaded_model
    from trainer.serving import export

    datasets = task.unit.load(config, task)
    if list(datasets.labels.names) != list(label_names):
        raise UserError(
            f"the run's data now yields labels {list(datasets.labels.names)}, but the "
            f"run trained on {list(label_names)}: its data files changed since"
        )
    loaded = export.load_module(model_dir)  # the whole module: token-sorted ladder batches
    temperature = decide_as_export(task, loaded)
    evaluated = {name: split for name, split in datasets.splits().items() if name != "train"}
    out = {}
    for name, (texts, pairs) in datasets.read_texts(*evaluated).items():
        split = evaluated[name]
        log.info("report: predicting %d %s texts with the exported model", len(split), name)
        if task.compares_pairs:  # a model of one text (embeddings): each text alone, no class names to check
            exported = loaded_model.predict_each_text(loaded, texts, pairs, config.train.eval_batch_size)
            outputs = task.outputs_of_export(exported, temperature)
        else:
            exported = loaded_model.predict_outputs(loaded, texts, config.train.eval_batch_size, pairs)
            check_names(task.export_names(exported), label_names, model_dir)
            outputs = task.outputs_of_export(exported, temperature, getattr(split, "sentences", None))
        out[name] = task.split_predictions(outputs, split.labels, texts, pairs, temperature)
    return out
