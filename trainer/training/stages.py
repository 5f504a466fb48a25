"""The stages of one training run, in the order `run.run` calls them.

Each stage reads what earlier stages put on the `RunContext` and adds its own part. Cheap checks
come first: a bad path, encoder or data file fails in seconds, before any accelerator is set up.
"""

import atexit
import dataclasses
import logging
import shutil
import tempfile

from trainer import config as config_lib
from trainer import storage
from trainer.errors import UserError
from trainer.training import jobdir
from trainer.training.context import Inputs, RunContext, Runtime, Trainable
from trainer.training.runlog import RunLog
from trainer.vertex import environment as vertex

log = logging.getLogger("trainer")


def check_inputs(ctx: RunContext) -> None:
    """Everything the run will touch, checked before anything is read or written."""
    from trainer.modeling import encoders
    from trainer.serving import model_dir
    from trainer.training import teacher
    from trainer.vertex import experiments

    encoders.check_encoder(ctx.config.model.encoder)
    experiments.check(ctx.config, ctx.environ)
    teacher.check(ctx.config)
    if ctx.is_chief:  # the checks that write nothing first
        model_dir.check_apart(ctx.paths.model_dir, _paths_beside_model(ctx.config))
        model_dir.check_run_may_replace(ctx.paths.model_dir, ctx.paths.job_dir, ctx.config.output.overwrite)
        jobdir.check_writable(ctx.paths.job_dir)


def _paths_beside_model(config) -> list:
    """(flag, path) of every path of the run that replacing --model-dir must not touch."""
    import os

    out, data, x = config.output, config.data, config.distillation
    paths = [
        ("--job-dir", out.job_dir),
        ("--checkpoint-dir", out.checkpoint_dir),
        ("--tensorboard-dir", out.tensorboard_dir),
        ("--cache-dir", out.cache_dir),
        ("--teacher", x.teacher),
    ]
    for flag, spec in (
        ("--training-file", data.training_file),
        ("--validation-file", data.validation_file),
        ("--testing-file", data.testing_file),
        ("--teacher-probabilities", x.teacher_probabilities),
        ("--unlabeled-file", x.unlabeled_file),
    ):
        paths += [(flag, part.strip()) for part in (spec or "").split(",") if part.strip()]
    encoder = config.model.encoder
    if encoder.startswith("gs://") or os.path.exists(encoder):
        paths.append(("--encoder", encoder))
    return paths


def prepare_job_dir(ctx: RunContext) -> None:
    """The job dir's lock (chief only: the workers write nothing there); then new, resumed or
    already finished; then config.json and training.log (chief only)."""
    job_id = vertex.read_environment(ctx.environ).job_id
    if ctx.is_chief:
        ctx.lock = jobdir.take_ownership(ctx.paths, ctx.environ)
    ctx.state = jobdir.decide(ctx.config, ctx.paths, job_id)
    replaced = ""
    if ctx.state == jobdir.NEW and storage.exists(ctx.paths.config):
        replaced = (
            ", replacing the dry run that was here"
            if jobdir.holds_dry_run(ctx.paths)
            else ""
            if storage.exists(ctx.paths.metrics)
            else ", replacing the unfinished run that was here"
        )
    if not ctx.is_chief:
        return
    if ctx.state == jobdir.NEW:
        jobdir.start_new(ctx.paths, job_id)
    if ctx.state != jobdir.FINISHED:
        config_lib.save(ctx.config, ctx.paths.config)
        ctx.run_log = RunLog(ctx.paths.log)
    described = {
        jobdir.NEW: "new run" + replaced,
        jobdir.RESUME: "continuing an unfinished run",
        jobdir.FINISHED: f"finished already by Vertex job {job_id}: nothing to do",
    }
    log.info("job dir %s (%s)", ctx.paths.job_dir, described[ctx.state])
    if ctx.ignored_arguments:
        log.warning(
            "ignoring arguments this trainer does not know (tolerated inside a Vertex job): %s",
            " ".join(ctx.ignored_arguments),
        )


def load_data(ctx: RunContext) -> None:
    """Reads and validates every split: data errors surface before a model is built.

    (Reading through tf.io.gfile does not start the TensorFlow runtime, so the strategy created
    next can still configure collectives.)
    """
    from trainer import task_registry

    ctx.task = task_registry.from_config(ctx.config)
    datasets = ctx.datasets = ctx.task.unit.load(ctx.config, ctx.task)
    ctx.task.prepare(datasets.labels, datasets.train.labels)
    log.info(
        "data: %s (%s)",
        ", ".join(f"{name} {size}" for name, size in datasets.sizes().items()),
        datasets.describe(ctx.task),
    )
    skipped = datasets.rows_skipped()
    if any(skipped.values()):
        log.info("skipped rows with empty text: %s", skipped)


def resolve_runtime(ctx: RunContext) -> None:
    """Devices -> strategy, precision, XLA, padding; the strategy before any other TF op."""
    import tf_keras

    from trainer.training import distribution

    config, env = ctx.config, vertex.read_environment(ctx.environ)
    devices = distribution.detect_devices(ctx.environ)
    plan = distribution.plan_runtime(
        config.runtime,
        devices=devices,
        cluster=env.cluster,
        encoder_backend=config.model.encoder_backend,
        freeze_encoder=config.model.freeze_encoder,
    )
    # Collective ops are configured at program start-up (tensorflow/tensorflow#55178).
    strategy = distribution.create_strategy(plan, devices, cluster=env.cluster)
    distribution.check_tpu_paths(plan, devices, _path_flags(config))
    _check_batches_split(config, plan, strategy.num_replicas_in_sync)
    scratch = None
    if not plan.is_chief:
        scratch = tempfile.mkdtemp(prefix=f"worker-{plan.task_index}-")
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)  # on errors too
    note = distribution.apply_precision(plan, config.model.encoder_backend)
    ctx.runtime = Runtime(devices, plan, strategy, note, scratch)
    log.info("worker role: %s %d%s", plan.task_type, plan.task_index, " (chief)" if plan.is_chief else "")
    for reason in plan.reasons:
        log.info("runtime: %s", reason)
    log.info(
        "strategy %s with %d replica(s); %s; XLA %s",
        plan.strategy,
        strategy.num_replicas_in_sync,
        note,
        "on" if plan.jit_compile else "off",
    )
    # Dropout draws from tf.random.Generator variables, which the resume checkpoint saves: the
    # legacy stateful ops would restart their sequence in a resumed process.
    tf_keras.backend.experimental.enable_tf_random_generator()
    tf_keras.utils.set_random_seed(config.train.seed)


def _path_flags(config) -> dict:
    return {
        "--job-dir": config.output.job_dir,
        "--model-dir": config.output.model_dir,
        "--checkpoint-dir": config.output.checkpoint_dir,
        "--training-file": config.data.training_file,
        "--validation-file": config.data.validation_file,
        "--testing-file": config.data.testing_file,
        "--teacher": config.distillation.teacher,
        "--teacher-probabilities": config.distillation.teacher_probabilities,
        "--unlabeled-file": config.distillation.unlabeled_file,
    }


def _check_batches_split(config, plan, replicas: int) -> None:
    if config.train.batch_size % replicas:
        raise UserError(f"--batch-size: {config.train.batch_size} does not split evenly over {replicas} replicas")
    if plan.static_shapes and config.train.eval_batch_size % replicas:
        raise UserError(
            f"--eval-batch-size: {config.train.eval_batch_size} does not split evenly "
            f"over {replicas} replicas, which static shapes need"
        )


def load_encoder(ctx: RunContext) -> None:
    """The pretrained encoder, built under the dtype policy inside the strategy's scope."""
    with ctx.runtime.strategy.scope():
        ctx.encoder = encoder_of(ctx.config, ctx.environ)
        if ctx.config.model.gradient_checkpointing:
            _recompute_blocks(ctx.encoder)
    pooling = ctx.config.model.pooling
    ctx.pooling = ctx.encoder.default_pooling if pooling == "auto" else pooling
    train, width = ctx.config.train, ctx.encoder.hidden_size
    ctx.learning_rate = train.learning_rate or ctx.task.learning_rate(default_learning_rate(width), width)
    ctx.layer_decay = layer_decay_for(train.layer_decay, width, ctx.task)
    log.info(
        "encoder %s (%s backend, hidden %d, %s); peak learning rate %g, layer decay %g",
        ctx.encoder.source,
        ctx.encoder.backend,
        width,
        ctx.task.unit.reads(ctx.pooling),
        ctx.learning_rate,
        ctx.layer_decay,
    )
    if ctx.encoder.kept_layers:
        log.info("encoder: %s", ctx.encoder.kept_layers)


def _recompute_blocks(encoder) -> None:
    """--gradient-checkpointing on the training network only (encoder_of's other callers
    build copies for export, which must trace no recomputation)."""
    from trainer.modeling.encoders import families
    from trainer.modeling.encoders.layers import recompute_blocks

    native = encoder.backend == "native"
    family = families.of_config(encoder.network.encoder_config) if native else None
    if family is None or not family.gradient_checkpointing:
        capable = families.described(lambda family: family.gradient_checkpointing)
        raise UserError(
            f"--gradient-checkpointing: {encoder.architecture} has no transformer "
            f"blocks that recompute; it applies to the native {capable} encoders"
        )
    recompute_blocks(encoder.network)
    log.info("gradient checkpointing: each transformer block recomputes its activations in the backward pass")


def default_learning_rate(hidden_size: int) -> float:
    """Peak learning rate when --learning-rate is not given, by the encoder's width (config's rule)."""
    return _by_width(config_lib.LEARNING_RATE_BY_WIDTH, config_lib.LEARNING_RATE_OTHERWISE, hidden_size)


def layer_decay_for(flag: float | None, hidden_size: int, task) -> float:
    """--layer-decay when given (1.0 included: no decay), else the task's default for the width."""
    return flag if flag is not None else task.layer_decay(default_layer_decay(hidden_size), hidden_size)


def default_layer_decay(hidden_size: int) -> float:
    """Layer decay when --layer-decay is not given, by the encoder's width (config's rule)."""
    return _by_width(config_lib.LAYER_DECAY_BY_WIDTH, config_lib.LAYER_DECAY_OTHERWISE, hidden_size)


def _by_width(table, otherwise: float, hidden_size: int) -> float:
    return next((value for width, value in table if hidden_size < width), otherwise)


def encoder_of(config, environ):
    """`--encoder` built as the config says (under the current dtype policy): the run's, and the
    bfloat16 copy's (results.export_bfloat16, trainer.export_quantized)."""
    from trainer.modeling import encoders

    model_config = config.model
    return encoders.load_encoder(
        model_config.encoder,
        preprocessor=model_config.preprocessor,
        backend=model_config.encoder_backend,
        seq_length=config.data.max_seq_length,
        cache_dir=config.output.cache_dir or encoders.default_cache_dir(environ),
        layers=model_config.encoder_layers,
    )


def tokenize(ctx: RunContext) -> None:
    """Every split tokenized by the task's unit (texts into the token cache, or found there);
    batching and steps per epoch from the token lengths."""
    config = ctx.config
    cache_root = storage.join(config.output.cache_dir, "tokens") if config.output.cache_dir else ctx.paths.token_cache
    teacher_validation = ctx.teacher.validation if ctx.teacher is not None else None
    tokens = ctx.task.unit.tokenize(
        config, ctx.datasets, ctx.encoder.preprocessor, ctx.long_texts, cache_root, ctx.is_chief, teacher_validation
    )
    packing = tokens.packing or ctx.long_texts
    inputs = batching(
        config, ctx.runtime, packing, tokens.splits, tokens.truncated, tokens.training, ctx.task.rows_per_label
    )
    ctx.inputs = dataclasses.replace(inputs, teacher_validation=tokens.teacher_validation)


def batching(
    config, runtime: Runtime, cut, tokenized: dict, truncated: dict, training=None, rows_per_label: int = 1
) -> Inputs:
    """Batching, steps and epochs of tokenized splits: the run's, and each cross-fitting fold's
    (trainer.training.cross_fit). `training`: what the model trains on, when not
    tokenized["train"] alone (distillation's transfer set); `rows_per_label`: the task's batch
    sampler (training batches of runs of one label, each padded alone: no length buckets)."""
    from trainer.data import input_pipeline

    lengths = input_pipeline.padded_lengths(config.data.max_seq_length, cut.windows)
    bucket = runtime.plan.sequence_padding == "bucket"
    sides = cut.sides if cut.mode != "windows" else 1
    train_batching = input_pipeline.Batching(
        config.train.batch_size, lengths, bucket, runtime.plan.static_shapes, rows_per_label, sides
    )
    eval_batching = input_pipeline.Batching(config.train.eval_batch_size, lengths, bucket, sides=sides)
    training = tokenized["train"] if training is None else training
    steps = train_batching.steps(training)
    if steps == 0:
        raise UserError(
            f"--batch-size: {config.train.batch_size} is larger than the "
            f"{len(training)} training examples with static batches"
        )
    # Static shapes: the last evaluation batch is filled with weight-0 rows.
    eval_sets = {
        name: input_pipeline.evaluation_dataset(split, eval_batching, pad_to_full_batches=runtime.plan.static_shapes)
        for name, split in tokenized.items()
    }
    dry_run = config.train.dry_run
    # Optimizer steps: with --gradient-accumulation-steps k, one per k batches (the epoch's last
    # group may be short, input_pipeline.grouped).
    steps_per_epoch = 1 if dry_run else -(-steps // config.train.gradient_accumulation_steps)
    epochs, total_steps = (
        (1, 1)
        if dry_run
        else training_length(
            steps_per_epoch, config.train.epochs or default_epochs(len(training)), config.train.max_steps
        )
    )
    period = config.train.eval_every_steps if config.train.eval_every_steps and not dry_run else steps_per_epoch
    inputs = Inputs(
        tokenized,
        training,
        train_batching,
        eval_sets,
        steps_per_epoch=steps_per_epoch,
        epochs=epochs,
        truncated=truncated,
        total_steps=total_steps,
        period_steps=period,
        periods=-(-total_steps // period),
    )
    replicas = runtime.strategy.num_replicas_in_sync
    limit = (
        " (--dry-run: one step)"
        if dry_run
        else f" (--max-steps: {total_steps} steps)"
        if config.train.max_steps
        else ""
    )
    accumulate = config.train.gradient_accumulation_steps
    log.info(
        "batch %d global, %d per replica%s; %s per epoch%s, %s%s; padding %s",
        config.train.batch_size,
        config.train.batch_size // replicas,
        f", gradients of {accumulate} batches summed per step (effective batch {accumulate * config.train.batch_size})"
        if accumulate > 1
        else "",
        counted(inputs.steps_per_epoch, "step"),
        smaller_batches_note(len(training), steps, config.train.batch_size),
        counted(inputs.epochs, "epoch"),
        limit
        + (
            f"; evaluated every {period} steps ({counted(inputs.periods, 'time')})" if period != steps_per_epoch else ""
        ),
        f"to one of {lengths}" if bucket else f"to {lengths[-1]}",
    )
    if rows_per_label > 1:
        log.info("training batches hold runs of %d texts of a label (the loss compares them)", rows_per_label)
    return inputs


def counted(count: int, noun: str) -> str:
    """ "1 epoch", "3 epochs": the plural where there are several."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def smaller_batches_note(rows: int, batches: int, batch_size: int) -> str:
    """What the batch size really is when length buckets split a small training set into
    partial batches (18 rows over 6 lengths: 6 batches of about 3, not one of 18)."""
    mean = rows / max(batches, 1)
    if mean >= 0.75 * min(batch_size, rows):
        return ""
    return (
        f" (of {mean:.1f} rows on average: texts of different lengths are batched apart, and "
        f"a length with fewer rows than --batch-size makes a smaller batch)"
    )


def default_epochs(examples: int) -> int:
    """Epochs when --epochs is not given, by the size of the training split (config's rule)."""
    return next((epochs for size, epochs in config_lib.EPOCHS_BY_SIZE if examples < size), config_lib.EPOCHS_OTHERWISE)


def training_length(steps_per_epoch: int, epochs: int, max_steps: int):
    """(epochs to run, optimizer steps in all): --max-steps, when given, decides both, the last
    epoch stopping part-way (callbacks.StepLimit); otherwise whole --epochs."""
    if max_steps:
        return -(-max_steps // steps_per_epoch), max_steps
    return epochs, steps_per_epoch * epochs


def build_model(ctx: RunContext) -> None:
    """Classifier, optimizer and the resume checkpoint, restored when there is one."""
    import tensorflow as tf

    from trainer.training import callbacks as cb

    with ctx.runtime.strategy.scope():
        model = _compiled_model(ctx)
        epoch_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="epochs_done")
        optimizer = model.optimizer  # compile may have wrapped it for loss scaling
        optimizer.build(model.trainable_variables)  # slots exist before a restore fills them
        state = tf.train.Checkpoint(
            model=model, optimizer=optimizer, epoch=epoch_counter, dropout=cb.dropout_generators(model)
        )
    paths = ctx.paths
    manager = tf.train.CheckpointManager(state, ctx.runtime.write_path(paths.resume), max_to_keep=1)
    # Every worker restores the chief's checkpoint: the others wrote theirs to scratch
    # directories of the processes that were killed.
    latest = tf.train.latest_checkpoint(paths.resume) if ctx.state == jobdir.RESUME else None
    if latest:
        state.restore(latest).assert_existing_objects_matched()
    first_epoch = int(epoch_counter.numpy())
    history = [row for row in cb.read_history(paths.history) if row["epoch"] <= first_epoch]
    if first_epoch:
        from trainer.training.fitting import period_name

        log.info("resumed after %s %d from %s", period_name(ctx.inputs), first_epoch, latest)
    elif ctx.state == jobdir.RESUME:
        log.info("the unfinished run completed no epoch: starting at epoch 1")
    ctx.trainable = Trainable(model, manager, epoch_counter, first_epoch, history)


def windows_of(ctx: RunContext):
    """build_classifier's `windows`: (--max-seq-length, --window-pooling) with --long-texts
    windows, else None."""
    if not ctx.windows:
        return None
    return ctx.config.data.max_seq_length, ctx.config.model.window_pooling


def model_of(ctx: RunContext, network):
    """The run's model on `network`, as the task's unit builds it: the classifier of a pooled
    text, or a tagger's tag per token."""
    task = ctx.task
    units = task.output_units(ctx.datasets.labels)
    return task.unit.model(network, units, ctx.config, ctx.pooling, task, windows_of(ctx))


def _compiled_model(ctx: RunContext):
    import tf_keras

    from trainer.modeling import heads, optimization

    config, encoder = ctx.config, ctx.encoder
    task = ctx.task
    model = model_of(ctx, encoder.network)
    if config.model.freeze_encoder:
        encoder.network.trainable = False
    elif not config.model.train_word_embeddings and heads.freeze_word_embeddings(encoder.network):
        log.info("word embeddings frozen (--train-word-embeddings to fine-tune them)")
    total_steps = ctx.inputs.total_steps
    optimizer = optimization.build_optimizer(
        ctx.learning_rate,
        total_steps,
        config.train.warmup_fraction,
        config.train.weight_decay,
        config.train.clip_norm,
        model.trainable_variables,
        ctx.layer_decay,
    )
    if ctx.runtime.plan.precision == "mixed_float16" and ctx.hub_encoder:
        # Keras adds loss scaling only under its own float16 policy; the grappler rewrite used
        # for hub encoders computes in float16 without it.
        optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
    loss, metrics = task.compiled_with(config.distillation if ctx.teacher is not None else None)
    model.compile(
        optimizer=optimizer,
        loss=loss,
        metrics=metrics,
        jit_compile=ctx.runtime.plan.jit_compile,
        steps_per_execution=config.runtime.steps_per_execution,
    )
    return model
