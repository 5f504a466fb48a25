"""The fit stage: epochs with per-epoch evaluation, history, best weights and checkpoints.

Callback order matters (see trainer.training.callbacks): the epoch's clock stops first, then
the epoch is evaluated, a NaN or infinite loss ends the run (callbacks.NonFiniteLoss), then
its history row and best weights are written, the tuning metric reported, training.log copied,
and the resume checkpoint comes last.
"""

import logging

from trainer.training.context import FitOutcome, RunContext

log = logging.getLogger("trainer")


def fit(ctx: RunContext) -> None:
    import tf_keras

    from trainer.training import callbacks as cb
    from trainer.vertex.experiments import ExperimentCallback

    outcome = ctx.fit = _callbacks(ctx)
    inputs, trainable = ctx.inputs, ctx.trainable
    # The last epoch, or span between evaluations, may end before its full length.
    limit = [cb.StepLimit(inputs.total_steps)] if inputs.total_steps != inputs.periods * inputs.period_steps else []
    guard = cb.NonFiniteLoss(inputs.periods, ctx.learning_rate, unit=period_name(inputs))
    callbacks = [
        *limit,
        outcome.clock,
        outcome.evaluation,
        guard,
        outcome.history,
        outcome.best,
        *([outcome.hypertune] if outcome.hypertune else []),
        *([ExperimentCallback(outcome.experiment)] if outcome.experiment else []),
        _progress(ctx),
        tf_keras.callbacks.TensorBoard(ctx.runtime.write_path(ctx.paths.tensorboard_dir), profile_batch=0),
    ]
    if ctx.config.runtime.log_every_steps:
        callbacks.append(
            cb.StepScalars(
                ctx.runtime.write_path(ctx.paths.tensorboard_dir),
                ctx.config.runtime.log_every_steps,
                ctx.config.train.batch_size * ctx.config.train.gradient_accumulation_steps,
            )
        )
    if ctx.run_log is not None:
        callbacks.append(tf_keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: ctx.run_log.sync()))
    callbacks.append(cb.EpochCheckpoint(trainable.checkpoint, trainable.epoch_counter, after_save=outcome.best.prune))
    if trainable.first_epoch >= inputs.periods or outcome.stopped_before:
        return
    train_data = _training_data(ctx)
    # Keras' epochs are the periods between evaluations; the data streams on across them.
    trainable.model.fit(
        train_data,
        epochs=inputs.periods,
        initial_epoch=trainable.first_epoch,
        steps_per_epoch=inputs.period_steps,
        callbacks=callbacks,
        verbose=0,
    )


def _training_data(ctx: RunContext):
    """The training batches from where the run stands to its end. A run resumed after an
    evaluation in the middle of an epoch (--eval-every-steps) starts that epoch's seeded order
    and skips the batches already trained on. Under MultiWorkerMirroredStrategy each worker
    reads its own share of the token cache's blocks, batched per replica, and repeats it to the
    common number of steps."""
    import dataclasses as dc

    from trainer.data import input_pipeline

    config, inputs = ctx.config, ctx.inputs
    first, done = divmod(ctx.trainable.first_epoch * inputs.period_steps, inputs.steps_per_epoch)
    train, batching = inputs.training, inputs.train_batching
    accumulate = 1 if config.train.dry_run else config.train.gradient_accumulation_steps
    replicas = ctx.runtime.strategy.num_replicas_in_sync
    # Keras would split each batch of a group over the replicas (tf.data rebatching), which
    # needs every batch of an element to have the same rows: groups are made per replica.
    if ctx.runtime.plan.strategy != "multiworker" and (accumulate == 1 or replicas == 1):
        data = input_pipeline.training_dataset(
            train, batching, seed=config.train.seed, first_epoch=first, epochs=inputs.epochs, accumulate=accumulate
        ).skip(done)
        return data.take(1) if config.train.dry_run else data

    def per_worker(context):
        size = context.get_per_replica_batch_size(batching.batch_size)
        # Each step takes one element per replica this input pipeline feeds.
        per_step = replicas // context.num_input_pipelines
        data = input_pipeline.training_dataset(
            train,
            dc.replace(batching, batch_size=size),
            seed=config.train.seed,
            first_epoch=first,
            epochs=inputs.epochs,
            steps_per_epoch=inputs.steps_per_epoch * per_step * accumulate,
            shard=(context.input_pipeline_id, context.num_input_pipelines),
            accumulate=accumulate,
        )
        log.info(
            "worker input: share %d of %d of the training data (%s), %d rows per replica batch",
            context.input_pipeline_id + 1,
            context.num_input_pipelines,
            _share(len(train.blocks), context.input_pipeline_id, context.num_input_pipelines),
            size,
        )
        return data.skip(done * per_step)

    return ctx.runtime.strategy.distribute_datasets_from_function(per_worker)


def _share(blocks: int, index: int, count: int) -> str:
    if blocks >= count:
        return f"{len(range(index, blocks, count))} of the {blocks} token-cache blocks"
    return f"one row in {count} of {blocks} token-cache block{'s' if blocks > 1 else ''}"


def _callbacks(ctx: RunContext) -> FitOutcome:
    from trainer.training import callbacks as cb
    from trainer.vertex import experiments
    from trainer.vertex.hypertune import HypertuneReporter

    config, paths, runtime = ctx.config, ctx.paths, ctx.runtime
    metric, patience = config.train.selection_metric, config.train.early_stopping_patience
    rows = ctx.trainable.history
    best = cb.BestWeights(
        runtime.write_path(paths.best),
        metric,
        patience,
        rows,
        shared_directory=paths.best,
        unit=period_name(ctx.inputs),
    )
    # A run killed after early stopping decided, but before it finished, must not train on.
    stopped_before = bool(patience and best.best_epoch and ctx.trainable.first_epoch - best.best_epoch >= patience)
    return FitOutcome(
        clock=cb.TrainingClock(),
        evaluation=cb.EpochEvaluation(
            lambda: predict_split(ctx, "validation"),
            lambda *out: ctx.task.summarize(*out, ctx.datasets.labels.names),
            ctx.task.epoch_metrics(),
        ),
        history=cb.HistoryWriter(paths.history if runtime.plan.is_chief else None, rows, ctx.task.history_columns()),
        best=best,
        # Every worker computes the same metrics; one report per trial step is the chief's.
        hypertune=HypertuneReporter(metric) if runtime.plan.is_chief else None,
        experiment=experiments.for_run(ctx),
        stopped_before=stopped_before,
    )


def period_name(inputs) -> str:
    """What every log line calls one Keras epoch: "span" with --eval-every-steps (the steps
    between two evaluations, which eval_history.csv numbers in its `epoch` column), else
    "epoch". One word for one thing: the progress, early-stopping, best-weights and resume
    lines must agree."""
    return "epoch" if inputs.period_steps == inputs.steps_per_epoch else "span"


def _progress(ctx: RunContext):
    from trainer.training import callbacks as cb

    train = ctx.inputs.training
    task = ctx.task
    inputs = ctx.inputs
    examples = len(train) * inputs.period_steps // inputs.steps_per_epoch
    return cb.ProgressLogger(
        ctx.config.runtime.log_every_seconds,
        inputs.periods,
        inputs.period_steps,
        examples,
        train.real_tokens * examples // len(train),
        unit=period_name(inputs),
        describe_epoch=task.describe_epoch,
        train_metric=task.train_metric,
    )


def predict_split(ctx: RunContext, name: str, dataset=None, rows=None) -> tuple:
    """(outputs, plain labels) of every example of a split (or of `dataset`, `rows` long), in row
    order, with a progress line per --log-every-seconds. A distilled run's training labels are
    packed with the teacher's targets (Task.plain unpacks them), so every score reads the plain
    ones."""
    from trainer.modeling import split_outputs
    from trainer.training import callbacks as cb

    dataset = ctx.inputs.eval_sets[name] if dataset is None else dataset
    rows = len(ctx.inputs.tokenized[name]) if rows is None else rows
    meter = cb.PredictionProgress(
        f"evaluating {name}", ctx.config.runtime.log_every_seconds, rows, int(dataset.cardinality())
    )
    outputs, labels = split_outputs.predict_logits(ctx.trainable.model, dataset, [meter])
    return outputs, ctx.task.plain(labels)
