"""Out-of-sample outputs of the training split (--find-label-issues): k-fold cross-fitting.

cleanlab judges a label by the probability a model gives it, and a model's probability of a row
it trained on says little (it has learned that row's label, right or wrong). So the training
rows are dealt into --label-issue-folds folds (stratified by class for classification), and for
each fold a model is trained on the other folds and predicts that fold. Each fold runs the run's
own stages with the run's recipe: the pretrained encoder loaded afresh, the same flags, the
same number of epochs over its (smaller) data, the best epoch by the run's --selection-metric
on the run's validation split, then a prediction of the held-out rows. A fold's checkpoints go
to JOB_DIR/cross_fit/fold-N, removed when the fold is done. Cost: k trainings of (k-1)/k of the
data, about k-1 times the run's training (metrics.json: durations.label_issues). Folds too small
to learn from are refused before any training (check_fold_sizes).
"""

import copy
import dataclasses
import logging

import numpy as np

from trainer import progress, storage, task_registry
from trainer.errors import UserError
from trainer.training import fitting, jobdir, results, stages
from trainer.training.context import Inputs, RunContext

log = logging.getLogger("trainer")

CROSS_FIT_DIR = "cross_fit"  # in the job dir: one fold's checkpoints at a time
# Rows of each class (multi-label: with each label) that every fold's training part must hold.
# A floor, not a guarantee (label_issues warns when a fold's model is at chance anyway): on 18
# training rows the fold models answered at chance and flagged 6 rows with scores of 0.49-0.51
# (issue #49).
MIN_ROWS_PER_CLASS = 10


def fold_of_rows(labels: np.ndarray, folds: int, seed: int, strata=None) -> np.ndarray:
    """Each row's fold, 0..folds-1: every stratum (Task.held_out_strata: a class) spread evenly
    over the folds when the task has `strata` and every stratum has a row per fold
    (scikit-learn warns otherwise), else rows dealt at random; the same for one seed."""
    from sklearn.model_selection import KFold, StratifiedKFold

    if len(labels) < folds:
        raise UserError(f"--label-issue-folds: {folds} folds need at least {folds} training rows, got {len(labels)}")
    stratified = strata is not None and np.unique(strata, return_counts=True)[1].min() >= folds
    rows = np.zeros(len(labels))
    splitter = (
        StratifiedKFold(folds, shuffle=True, random_state=seed)
        if stratified
        else KFold(folds, shuffle=True, random_state=seed)
    )
    assigned = np.empty(len(labels), np.int64)
    for fold, (_, held) in enumerate(splitter.split(rows, strata if stratified else None)):
        assigned[held] = fold
    return assigned


def folds_of(ctx: RunContext) -> np.ndarray:
    """Each training row's fold in this run (the same before and after tokenizing)."""
    train, labels = ctx.config.train, ctx.datasets.train.labels
    return fold_of_rows(labels, train.label_issue_folds, train.seed, ctx.task.held_out_strata(labels))


def check_fold_sizes(task, labels: np.ndarray, folds: np.ndarray, names) -> None:
    """Refuses folds whose training part holds fewer than MIN_ROWS_PER_CLASS rows of a class (or
    with a label): its model would answer that class at chance, and cleanlab would flag its rows
    for it. Checked before the run trains anything, so the user loses no time."""
    members = task.label_issues.members(labels, len(names))
    k = int(folds.max()) + 1
    counts = np.stack([members[folds != fold].sum(axis=0) for fold in range(k)])  # [k, classes]
    fold, worst = np.unravel_index(np.argmin(counts), counts.shape)
    if counts[fold, worst] >= MIN_ROWS_PER_CLASS:
        return
    sizes = [int(np.sum(folds != f)) for f in range(k)]
    kind = task.label_noun
    raise UserError(
        f"--find-label-issues: {len(labels)} training rows in {k} folds (--label-issue-folds) "
        f"train each fold's model on {min(sizes)}-{max(sizes)} rows, and fold {fold + 1}'s would "
        f"see {counts[fold, worst]} of the {int(members[:, worst].sum())} rows of {kind} "
        f"{names[worst]!r}; a fold's model needs at least {MIN_ROWS_PER_CLASS} rows of every "
        f"{kind}, or it answers at chance and the ranking means nothing. Add training rows, raise "
        f"--label-issue-folds (each fold trains on (k-1)/k of the rows, at the cost of one more "
        f"training), or drop --find-label-issues"
    )


def out_of_sample_outputs(ctx: RunContext) -> tuple:
    """(the training split's outputs (logits), each row's from the fold model that did not
    train on it, in row order; each row's fold)."""
    config = ctx.config
    k, train = config.train.label_issue_folds, ctx.inputs.tokenized["train"]
    folds = folds_of(ctx)
    log.info(
        "label issues: cross-fitting %d models, each on %d%% of the %d training rows, to predict the rest",
        k,
        round(100 * (k - 1) / k),
        len(train),
    )
    meter = progress.Progress("label issues: training rows predicted out of sample", 0.0, len(train))
    outputs = None
    for fold in range(k):
        held = np.flatnonzero(folds == fold)
        predicted = _fold_outputs(ctx, fold, np.flatnonzero(folds != fold), held)
        if outputs is None:
            outputs = np.zeros((len(train), *predicted.shape[1:]), predicted.dtype)
        outputs[held] = predicted
        meter.update(int(np.sum(folds <= fold)))
    return outputs, folds


def _fold_outputs(ctx: RunContext, fold: int, kept: np.ndarray, held: np.ndarray) -> np.ndarray:
    import tf_keras

    fold_ctx = _fold_context(ctx, fold, kept)
    _remove(fold_ctx)  # what an interrupted run left there
    log.info(
        "label issues: fold %d/%d: training on %d rows, then predicting %d",
        fold + 1,
        ctx.config.train.label_issue_folds,
        len(kept),
        len(held),
    )
    # Each fold's head starts from its own seeded draw (the run seeded once in resolve_runtime).
    tf_keras.utils.set_random_seed(ctx.config.train.seed + fold + 1)
    try:
        stages.load_encoder(fold_ctx)
        fold_ctx.inputs = _fold_inputs(ctx, fold_ctx, kept, held)
        stages.build_model(fold_ctx)
        fitting.fit(fold_ctx)
        results.restore_best_weights(fold_ctx)
        return fitting.predict_split(fold_ctx, "heldout")[0]
    finally:
        _remove(fold_ctx)


def _remove(fold_ctx: RunContext) -> None:
    """JOB_DIR/cross_fit, which holds one fold's files at a time."""
    directory = fold_ctx.paths.job_dir.rstrip("/").rsplit("/", 1)[0]
    if fold_ctx.is_chief and storage.exists(directory):
        storage.remove(directory)


def _fold_context(ctx: RunContext, fold: int, kept: np.ndarray) -> RunContext:
    """A run of its own in JOB_DIR/cross_fit/fold-N: the run's config and data, a fresh task
    object (a multi-label task's thresholds are fitted on validation after the run), and a
    runtime that is nobody's chief: a fold reports no tuning metric and writes no
    eval_history.csv for anyone to read."""
    config = copy.deepcopy(ctx.config)
    out = config.output
    out.job_dir = storage.join(storage.join(ctx.paths.job_dir, CROSS_FIT_DIR), f"fold-{fold + 1}")
    out.model_dir, out.checkpoint_dir, out.tensorboard_dir = (
        storage.join(out.job_dir, name) for name in ("model", "checkpoints", "tensorboard")
    )
    train = config.train
    # The run's passes over the data: its epochs, or its --max-steps scaled to the fold's rows
    # (a multiple of --steps-per-execution, as validation requires of the flag).
    train.epochs = ctx.inputs.epochs
    if train.max_steps:
        per_call = config.runtime.steps_per_execution
        scaled = train.max_steps * len(kept) / len(ctx.inputs.tokenized["train"])
        train.max_steps = max(per_call, int(np.ceil(scaled / per_call)) * per_call)
    task = task_registry.from_config(config)
    task.prepare(ctx.datasets.labels, ctx.datasets.train.labels[kept])
    plan = dataclasses.replace(ctx.runtime.plan, is_chief=False)
    return RunContext(
        config,
        ctx.environ,
        jobdir.JobPaths.from_config(config),
        ctx.is_chief,
        task=task,
        datasets=ctx.datasets,
        runtime=dataclasses.replace(ctx.runtime, plan=plan),
    )


def _fold_inputs(ctx: RunContext, fold_ctx: RunContext, kept: np.ndarray, held: np.ndarray) -> Inputs:
    tokenized = ctx.inputs.tokenized
    fold_splits = {
        "train": tokenized["train"].take(kept),
        "validation": tokenized["validation"],
        "heldout": tokenized["train"].take(held),
    }
    truncated = {name: 0 for name in fold_splits}  # logged by the run already
    return stages.batching(fold_ctx.config, fold_ctx.runtime, fold_ctx.long_texts, fold_splits, truncated)
