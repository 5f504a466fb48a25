"""One training run, from a validated config to every artifact in the job directory.

Layout of a job directory (all written atomically; metrics.json last, so its presence means
the run finished):
    config.json  metrics.json  eval_history.csv  training.log  model/  tensorboard/  checkpoints/
"""
import atexit
import dataclasses
import json
import logging
import os
import platform
import shutil
import tempfile
import time
from typing import Mapping

import numpy as np

from trainer import config as config_lib, storage
from trainer.cloud import environment as vertex
from trainer.config import Config
from trainer.errors import UserError

log = logging.getLogger("trainer")

FINISHED_MARKER = "metrics.json"


@dataclasses.dataclass
class JobPaths:
    job_dir: str
    model_dir: str
    checkpoint_dir: str
    tensorboard_dir: str

    @property
    def config(self):
        return _join(self.job_dir, "config.json")

    @property
    def metrics(self):
        return _join(self.job_dir, FINISHED_MARKER)

    @property
    def history(self):
        return _join(self.job_dir, "eval_history.csv")

    @property
    def log(self):
        return _join(self.job_dir, "training.log")


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def _resumable_settings(config: Config) -> dict:
    """What must match for an unfinished run to be resumed rather than mixed with another."""
    values = config.to_dict()
    values["output"] = {}
    values["runtime"] = {k: v for k, v in values["runtime"].items()
                         if k in ("sequence_padding", "static_shapes")}
    return values


def prepare_job_dir(config: Config, paths: JobPaths, is_chief: bool) -> bool:
    """Refuses to clobber a finished run; returns True when resuming an unfinished one."""
    finished = storage.exists(paths.metrics)
    if finished and not config.output.overwrite:
        raise UserError(f"--job-dir: {paths.job_dir} holds a finished run ({paths.metrics}). "
                        f"Pass --overwrite to replace it, or choose another --job-dir.")
    if config.output.overwrite:
        if is_chief:
            for stale in (paths.checkpoint_dir, paths.history, paths.metrics):
                if storage.exists(stale):
                    (tf_rmtree if stale == paths.checkpoint_dir else tf_remove)(stale)
        return False
    if storage.exists(paths.config):
        previous = config_lib.load(paths.config)
        if _resumable_settings(previous) != _resumable_settings(config):
            changed = _differences(_resumable_settings(previous), _resumable_settings(config))
            raise UserError(f"--job-dir: {paths.job_dir} holds an unfinished run with other "
                            f"settings ({', '.join(changed[:4])}); rerun with the same flags to "
                            f"resume it, or pass --overwrite to start over.")
        return True
    return False


def _differences(a: dict, b: dict, prefix="") -> list:
    out = []
    for key in sorted(set(a) | set(b)):
        if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
            out += _differences(a[key], b[key], prefix + key + ".")
        elif a.get(key) != b.get(key):
            out.append(f"{prefix}{key}: {a.get(key)!r} -> {b.get(key)!r}")
    return out


def tf_rmtree(path):
    import tensorflow as tf
    tf.io.gfile.rmtree(path)


def tf_remove(path):
    import tensorflow as tf
    tf.io.gfile.remove(path)


def library_versions() -> dict:
    import pandas
    import sklearn
    import tensorflow as tf
    import tensorflow_hub
    import tensorflow_text
    import tf_keras

    import trainer
    return {"trainer": trainer.__version__, "python": platform.python_version(),
            "tensorflow": tf.__version__, "tf_keras": tf_keras.__version__,
            "tensorflow_text": tensorflow_text.__version__,
            "tensorflow_hub": tensorflow_hub.__version__, "numpy": np.__version__,
            "pandas": pandas.__version__, "scikit_learn": sklearn.__version__}


def run(config: Config, environ: Mapping[str, str]) -> dict:
    """Trains, evaluates and exports; returns metrics.json's content."""
    started = time.perf_counter()
    from trainer.data import splits as data
    from trainer.training import distribution

    env = vertex.read_environment(environ)
    _, _, is_chief = vertex.task_role(env.cluster)
    out = config.output
    paths = JobPaths(out.job_dir, out.model_dir, out.checkpoint_dir, out.tensorboard_dir)
    resuming = prepare_job_dir(config, paths, is_chief)
    # Data errors surface next, in seconds, before any accelerator or model is set up.
    # (Reading files through tf.io.gfile does not start the TensorFlow runtime, so the strategy
    # below can still configure collectives.)
    datasets = data.load_datasets(config)

    devices = distribution.detect_devices(environ)
    plan = distribution.plan_runtime(config.runtime, devices=devices, cluster=env.cluster,
                                     encoder_backend=config.model.encoder_backend,
                                     freeze_encoder=config.model.freeze_encoder)
    # Before any other TensorFlow op: collective ops are configured at program start-up
    # (tensorflow/tensorflow#55178).
    strategy = distribution.create_strategy(plan, devices, cluster=env.cluster)
    distribution.check_tpu_paths(plan, devices, {
        "--job-dir": out.job_dir, "--model-dir": out.model_dir,
        "--checkpoint-dir": out.checkpoint_dir, "--training-file": config.data.training_file,
        "--validation-file": config.data.validation_file,
        "--testing-file": config.data.testing_file})
    if config.train.batch_size % strategy.num_replicas_in_sync:
        raise UserError(f"--batch-size: {config.train.batch_size} does not split evenly over "
                        f"{strategy.num_replicas_in_sync} replicas")
    if plan.static_shapes and config.train.eval_batch_size % strategy.num_replicas_in_sync:
        raise UserError(f"--eval-batch-size: {config.train.eval_batch_size} does not split evenly "
                        f"over {strategy.num_replicas_in_sync} replicas, which static shapes need")

    import tensorflow as tf
    import tf_keras

    from trainer.data import pipeline
    from trainer.modeling import encoders, heads as model_lib, optimization
    from trainer.serving import export
    from trainer.training import callbacks as cb, evaluation

    scratch = None
    if not plan.is_chief:
        scratch = tempfile.mkdtemp(prefix=f"worker-{plan.task_index}-")
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)  # on errors too

    def write_path(path):
        """Every worker writes (collectives need them all); only the chief's copy is kept."""
        return path if plan.is_chief else os.path.join(scratch, os.path.basename(path.rstrip("/")))

    if plan.is_chief:
        config_lib.save(config, paths.config)
    log.info("job dir %s (%s)", paths.job_dir, "resuming" if resuming else "new run")
    log.info("worker role: %s %d%s", plan.task_type, plan.task_index, " (chief)" if plan.is_chief else "")
    for reason in plan.reasons:
        log.info("runtime: %s", reason)
    precision_note = distribution.apply_precision(plan, config.model.encoder_backend)
    log.info("strategy %s with %d replica(s); %s; XLA %s", plan.strategy,
             strategy.num_replicas_in_sync, precision_note, "on" if plan.jit_compile else "off")
    # Dropout draws from tf.random.Generator variables, which the resume checkpoint saves: the
    # default legacy stateful ops would restart their sequence in a resumed process (issue 4).
    tf_keras.backend.experimental.enable_tf_random_generator()
    tf_keras.utils.set_random_seed(config.train.seed)

    labels = datasets.labels.names
    log.info("data: %s (text %r, label %r as %s: %s)", ", ".join(
        f"{name} {size}" for name, size in datasets.sizes().items()), datasets.text_column,
        datasets.label_column, datasets.labels.kind, labels)
    skipped = datasets.rows_skipped()
    if any(skipped.values()):
        log.info("skipped rows with empty text: %s", skipped)

    with strategy.scope():
        encoder = encoders.load_encoder(
            config.model.encoder, preprocessor=config.model.preprocessor,
            backend=config.model.encoder_backend, seq_length=config.data.max_seq_length,
            cache_dir=out.cache_dir or encoders.default_cache_dir(environ))
    pooling = encoder.default_pooling if config.model.pooling == "auto" else config.model.pooling
    log.info("encoder %s (%s backend, hidden %d, %s pooling)", encoder.source, encoder.backend,
             encoder.hidden_size, pooling)

    weights = None
    if config.train.class_weights == "balanced":
        per_class = data.class_weights(datasets.train.labels, len(labels))
        weights = per_class[datasets.train.labels]
        log.info("class weights: %s", dict(zip(labels, np.round(per_class, 3).tolist())))
    tokenize_start = time.perf_counter()
    tokenized = pipeline.tokenize_splits(
        {name: (split.texts, split.labels, weights if name == "train" else None)
         for name, split in datasets.splits().items()}, encoder.preprocessor)
    truncated = {name: int((t.lengths >= config.data.max_seq_length).sum())
                 for name, t in tokenized.items()}
    log.info("tokenized %d texts in %.1fs; mean %.1f tokens, %s at the --max-seq-length limit",
             sum(len(t) for t in tokenized.values()), time.perf_counter() - tokenize_start,
             tokenized["train"].lengths.mean(), truncated)

    lengths = pipeline.padded_lengths(config.data.max_seq_length)
    bucket = plan.sequence_padding == "bucket"
    train_batching = pipeline.Batching(config.train.batch_size, lengths, bucket, plan.static_shapes)
    eval_batching = pipeline.Batching(config.train.eval_batch_size, lengths, bucket)
    steps_per_epoch = train_batching.steps(tokenized["train"])
    if steps_per_epoch == 0:
        raise UserError(f"--batch-size: {config.train.batch_size} is larger than the "
                        f"{len(tokenized['train'])} training examples with static batches")
    epochs = 1 if config.train.dry_run else config.train.epochs
    if config.train.dry_run:
        steps_per_epoch = 1
    total_steps = steps_per_epoch * epochs
    log.info("batch %d global, %d per replica; %d steps per epoch, %d epochs; padding %s",
             config.train.batch_size, config.train.batch_size // strategy.num_replicas_in_sync,
             steps_per_epoch, epochs, f"to one of {lengths}" if bucket else f"to {lengths[-1]}")

    with strategy.scope():
        model = model_lib.build_classifier(encoder.network, len(labels), pooling, config.model.dropout)
        if config.model.freeze_encoder:
            encoder.network.trainable = False
        elif not config.model.train_word_embeddings:
            if model_lib.freeze_word_embeddings(encoder.network):
                log.info("word embeddings frozen (--train-word-embeddings to fine-tune them)")
        optimizer = optimization.build_optimizer(
            config.train.learning_rate, total_steps, config.train.warmup_fraction,
            config.train.weight_decay, config.train.clip_norm)
        if plan.precision == "mixed_float16" and config.model.encoder_backend == "hub":
            # Keras adds loss scaling only under its own float16 policy; the grappler rewrite
            # used for hub encoders computes in float16 without it.
            optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer,
                      loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                      jit_compile=plan.jit_compile, steps_per_execution=config.runtime.steps_per_execution)
        epoch_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="epochs_done")
        optimizer = model.optimizer  # compile may have wrapped it for loss scaling
        optimizer.build(model.trainable_variables)  # slots exist before a restore fills them
        resume_state = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch_counter,
                                           dropout=cb.dropout_generators(model))
    resume_dir = _join(paths.checkpoint_dir, "resume")
    manager = tf.train.CheckpointManager(resume_state, write_path(resume_dir), max_to_keep=1)
    # Every worker restores the chief's checkpoint: the others wrote theirs to scratch
    # directories of the processes that were killed.
    latest = tf.train.latest_checkpoint(resume_dir) if resuming else None
    if latest:
        resume_state.restore(latest).assert_existing_objects_matched()
    first_epoch = int(epoch_counter.numpy())
    history_rows = [r for r in cb.read_history(paths.history) if r["epoch"] <= first_epoch]
    if first_epoch:
        log.info("resumed after epoch %d from %s", first_epoch, latest)

    # Static shapes: the last batch is filled with weight-0 rows.
    eval_sets = {name: pipeline.evaluation_dataset(t, eval_batching,
                                                   pad_to_full_batches=plan.static_shapes)
                 for name, t in tokenized.items()}
    if config.train.dry_run:
        eval_sets = {name: ds.take(1) for name, ds in eval_sets.items()}
    evaluate = lambda name: evaluation.evaluate(model, eval_sets[name], labels)  # noqa: E731

    best_dir = _join(paths.checkpoint_dir, "best")
    metric = config.train.selection_metric
    evaluation_cb = cb.EpochEvaluation(lambda: evaluate("validation"))
    best_cb = cb.BestWeights(write_path(best_dir), metric, config.train.early_stopping_patience,
                             history_rows, shared_directory=best_dir)
    history_cb = cb.HistoryWriter(paths.history if plan.is_chief else None, history_rows)
    progress = cb.ProgressLogger(config.runtime.log_every_seconds, epochs, steps_per_epoch,
                                 len(tokenized["train"]), tokenized["train"].real_tokens)
    from trainer.cloud.hypertune import HypertuneReporter
    # Every worker computes the same metrics; one report per trial step is the chief's.
    hypertune = HypertuneReporter(metric) if plan.is_chief else None
    clock = cb.TrainingClock()
    callbacks = [clock, evaluation_cb, history_cb, best_cb, *([hypertune] if hypertune else []), progress,
                 tf_keras.callbacks.TensorBoard(write_path(paths.tensorboard_dir), profile_batch=0),
                 cb.EpochCheckpoint(manager, epoch_counter, after_save=best_cb.prune)]

    # A run killed after early stopping decided, but before it finished, must not train on.
    already_stopped = bool(config.train.early_stopping_patience and best_cb.best_epoch and
                           first_epoch - best_cb.best_epoch >= config.train.early_stopping_patience)
    if first_epoch < epochs and not already_stopped:
        train_data = pipeline.training_dataset(tokenized["train"], train_batching,
                                               seed=config.train.seed, first_epoch=first_epoch,
                                               epochs=epochs)
        if config.train.dry_run:
            train_data = train_data.take(1)
        model.fit(train_data, epochs=epochs, initial_epoch=first_epoch,
                  steps_per_epoch=steps_per_epoch, callbacks=callbacks, verbose=0)
    train_seconds = clock.seconds

    # When the last epoch trained here is the best one, the model holds its weights already and
    # its validation metrics are known: one pass over the validation data fewer.
    best_is_current = best_cb.best_epoch is not None and best_cb.best_epoch == evaluation_cb.last_epoch
    if best_cb.weights_prefix and not best_is_current:
        tf.train.Checkpoint(model=model).read(best_cb.weights_prefix).expect_partial()
        log.info("restored the best weights: epoch %d, %s %.4f", best_cb.best_epoch, metric,
                 best_cb.best)

    evaluate_start = time.perf_counter()
    results = {name: evaluation_cb.last if name == "validation" and best_is_current else evaluate(name)
               for name in eval_sets}
    evaluate_seconds = time.perf_counter() - evaluate_start
    for name, result in results.items():
        log.info("%-10s loss %.4f  accuracy %.4f  macro-F1 %.4f  macro-recall %.4f  (%d examples)",
                 name, result["loss"], result["accuracy"], result["macro_f1"],
                 result["macro_recall"], result["examples"])
    if hypertune:
        hypertune.report_final(results["validation"][metric.removeprefix("val_")],
                               step=len(history_cb.rows))

    export_start = time.perf_counter()
    module = export.ServingModule(encoder.preprocessor, model, labels, config.data.max_seq_length)
    export.export(module, paths.model_dir, write_dir=write_path(paths.model_dir))
    export_seconds = time.perf_counter() - export_start
    log.info("exported the model (raw strings in, probabilities out) to %s",
             write_path(paths.model_dir))

    metrics = {
        **results,
        "labels": labels,
        "label_kind": datasets.labels.kind,
        "text_column": datasets.text_column,
        "label_column": datasets.label_column,
        "dataset_sizes": datasets.sizes(),
        "rows_skipped": skipped,
        "truncated_texts": truncated,
        "hyperparameters": {**dataclasses.asdict(config.train), "dropout": config.model.dropout,
                            "max_seq_length": config.data.max_seq_length, "pooling": pooling,
                            "encoder": config.model.encoder},
        "best_epoch": best_cb.best_epoch,
        "epochs_completed": len(history_cb.rows),
        "stopped_early": best_cb.stopped_early or already_stopped,
        "device": {**distribution.describe(plan, strategy), "platform": devices.platform,
                   "precision_note": precision_note, "encoder_backend": encoder.backend,
                   "encoder_source": encoder.source},
        "versions": library_versions(),
        "durations": {"total": time.perf_counter() - started, "train": train_seconds,
                      "first_step": clock.first_step_seconds,
                      "evaluate": evaluate_seconds + evaluation_cb.seconds_evaluating,
                      "export": export_seconds},
        # Steady state: after the first step, which traces the graph (see durations.first_step).
        "train_examples_per_second": (clock.steady_steps * config.train.batch_size / clock.steady_seconds
                                      if clock.steady_seconds > 0 else None),
        "train_tokens_per_second": (clock.steady_steps * config.train.batch_size / clock.steady_seconds
                                    * tokenized["train"].real_tokens / len(tokenized["train"])
                                    if clock.steady_seconds > 0 else None),
    }
    if plan.is_chief:
        storage.write_text_atomic(paths.metrics, json.dumps(metrics, indent=2) + "\n")
    log.info("done in %.0fs; artifacts in %s", metrics["durations"]["total"], paths.job_dir)
    return metrics
