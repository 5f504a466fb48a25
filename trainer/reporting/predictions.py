"""A run's validation and test predictions as the report reads them (SplitPredictions, of
trainer.tasks.predictions: each task makes its own).

The training run hands over the outputs it computed its metrics from (Task.split_predictions):
the end of a run predicts each split once. `trainer.report` on a finished run recomputes them
with the exported model (`recompute`, Task.export_predictions).

The data comes back from config.json alone: `load_datasets` re-reads and re-splits it exactly
as training did (seeded).
"""
import logging

from trainer.errors import UserError

log = logging.getLogger("trainer")


def load_model(model_dir: str):
    """(loaded SavedModel, its temperature); keep the first alive while calling its signature."""
    import tensorflow as tf

    import tensorflow_text  # noqa: F401  registers the tokenizer ops the graph uses

    loaded = tf.saved_model.load(model_dir)
    temperature = float(loaded.temperature.numpy()) if hasattr(loaded, "temperature") else 1.0
    return loaded, temperature


def _check_names(names, label_names, model_dir: str) -> None:
    if list(names) != list(label_names):
        raise UserError(f"{model_dir}: the model's labels {list(names)} are not the run's "
                        f"{list(label_names)}")


def _predict(task, model, split, texts, pairs, batch_size: int, temperature: float, label_names,
             model_dir: str):
    """One split's predictions, as the task's export returns them."""
    from trainer.serving import predict

    exported = predict.predict_outputs(model, texts, batch_size, pairs)
    if "label_names" in exported:
        _check_names(predict.label_names_of(exported), label_names, model_dir)
    return task.export_predictions(exported, split.labels, texts, pairs, temperature)


def recompute(config, model_dir: str, label_names, task) -> dict:
    """{"validation": ..., "test": ...} (test when the run had one) from the exported model of a
    `task` run."""
    from trainer.data.loading import load_datasets

    datasets = load_datasets(config, task)
    if list(datasets.labels.names) != list(label_names):
        raise UserError(f"the run's data now yields labels {list(datasets.labels.names)}, but the "
                        f"run trained on {list(label_names)}: its data files changed since")
    loaded, temperature = load_model(model_dir)
    serve = loaded  # the whole module, not its signature: token-sorted ladder batches
    evaluated = {name: split for name, split in datasets.splits().items() if name != "train"}
    out = {}
    for name, (texts, pairs) in datasets.read_texts(*evaluated).items():
        split = evaluated[name]
        log.info("report: predicting %d %s texts with the exported model", len(split), name)
        out[name] = _predict(task, serve, split, texts, pairs, config.train.eval_batch_size,
                             temperature, label_names, model_dir)
    return out
