"""The teacher stage of a distilled run: the teacher's outputs for every text the student learns
from, packed with the labels the token cache stores (the task's distillation part: pack).

Both teachers are one path. `--teacher-probabilities FILE` is read as given. A `--teacher
MODEL_DIR` is first run once over the training, unlabeled and validation texts, batched, with
a progress line, into JOB_DIR/teacher/<key>.csv (CACHE_DIR/teacher/ with --cache-dir, which
tuning trials share), written atomically as trainer.predict writes its output; the key hashes
the teacher's files and the texts, so a resumed or repeated run with the same teacher and data
reads that file instead of running the teacher again. Other workers wait for the chief's file,
as they wait for its token cache.
"""

import hashlib
import json
import logging
import time

import numpy as np

from trainer import storage
from trainer.data import splits as splits_lib
from trainer.errors import UserError
from trainer.tasks import parts
from trainer.training import context
from trainer.training.context import RunContext

log = logging.getLogger("trainer")

WAIT_SECONDS = 6 * 3600  # a worker waits at most this long for the chief's teacher file


def check(config) -> None:
    """--teacher holds an export, --teacher-probabilities and --unlabeled-file exist: checked
    with the other inputs, before anything is read."""
    x = config.distillation
    if x.teacher and not storage.exists(storage.join(x.teacher, "saved_model.pb")):
        storage.require_bucket(x.teacher)
        raise UserError(
            f"--teacher: no exported model in {x.teacher} (expected saved_model.pb; "
            f"point it at the teacher run's JOB_DIR/model)"
        )
    for flag, spec in (("--teacher-probabilities", x.teacher_probabilities), ("--unlabeled-file", x.unlabeled_file)):
        if spec:
            storage.expand_paths(spec, flag)  # one error line for a missing file or glob


def teach(ctx: RunContext) -> None:
    """Stage: with a teacher, the unlabeled rows join the data, every training and unlabeled
    row's labels become its packed targets, and the run's task learns from them."""
    x, datasets = ctx.config.distillation, ctx.datasets
    if not x.teacher_source:
        return
    flag = "--teacher-probabilities" if x.teacher_probabilities else "--teacher"
    distillation = parts.require(ctx.task, "distillation", flag)
    rows = ctx.task.unit.teacher  # the teacher's file of the task's rows: texts' or sentences'
    if x.unlabeled_file:
        datasets.unlabeled = rows.unlabeled(x.unlabeled_file, datasets)
        if ctx.config.train.dry_run:  # one batch of them, as of every split
            datasets.unlabeled = splits_lib.head(datasets.unlabeled, splits_lib.dry_run_rows(ctx.config))
    start = time.perf_counter()
    path = x.teacher_probabilities or _model_teacher_file(ctx, rows)
    seconds = time.perf_counter() - start if x.teacher else 0.0
    task = ctx.task
    values, validation = rows.values(path, datasets, task, flag)
    datasets.train.labels = distillation.pack(datasets.train.labels, values[splits_lib.TRAIN])
    if datasets.unlabeled is not None:
        datasets.unlabeled.labels = distillation.pack(None, values[splits_lib.UNLABELED])
    ctx.teacher = context.Teacher(x.teacher_source, "model" if x.teacher else "file", path, validation, seconds)
    log.info(
        "distillation: the teacher's outputs of %d training and %d unlabeled %s from %s; temperature %g, alpha %g",
        len(datasets.train),
        len(datasets.unlabeled) if datasets.unlabeled is not None else 0,
        rows.noun,
        path,
        x.distill_temperature,
        x.distill_alpha,
    )


def _model_teacher_file(ctx: RunContext, rows) -> str:
    """JOB_DIR/teacher/<key>.csv (.jsonl for sentences; under --cache-dir): found, written now
    by the chief, or waited for."""
    from trainer.data.token_cache import wait_for

    x, datasets, cache_dir = ctx.config.distillation, ctx.datasets, ctx.config.output.cache_dir
    directory = storage.join(cache_dir, "teacher") if cache_dir else ctx.paths.teacher_dir
    path = storage.join(directory, f"{_key(x.teacher, datasets)}.{rows.suffix}")
    if storage.exists(path):
        log.info("teacher: reusing its outputs in %s", path)
    elif not ctx.is_chief:
        wait_for(path, WAIT_SECONDS, "the teacher's outputs")
    else:
        rows.write(x.teacher, datasets, path, ctx.config.runtime.log_every_seconds, ctx.task)
    return path


def _key(model_dir: str, datasets) -> str:
    """The teacher's files (path, size, modification time) and the texts it labels."""
    digest = hashlib.sha256()
    files = [storage.join(model_dir, "saved_model.pb"), storage.join(model_dir, "variables/variables.index")]
    digest.update(json.dumps([[path, *storage.identity(path)] for path in files]).encode())
    for name in (splits_lib.TRAIN, splits_lib.UNLABELED, splits_lib.VALIDATION):
        split = datasets.splits().get(name)
        if split is not None:
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(split.hashes).tobytes())
    return digest.hexdigest()[:16]


def metrics_block(ctx: RunContext) -> dict | None:
    """metrics.json's `distillation` block: the teacher, the transfer set, the loss's settings,
    and the teacher's and the student's validation metrics side by side with their agreement
    (None without a teacher)."""
    teacher = ctx.teacher
    if teacher is None:
        return None
    x, datasets, task = ctx.config.distillation, ctx.datasets, ctx.task
    block = {
        "teacher": teacher.source,
        "teacher_kind": teacher.kind,
        "teacher_file": teacher.file,
        "transfer_set": {
            "train": len(datasets.train),
            "unlabeled": len(datasets.unlabeled) if datasets.unlabeled else 0,
        },
        "temperature": x.distill_temperature,
        "alpha": x.distill_alpha,
        "teacher_seconds": teacher.seconds,
        "validation": None,
    }
    values = ctx.inputs.teacher_validation
    if values is not None and splits_lib.VALIDATION in ctx.outputs:
        outputs, labels = ctx.outputs[splits_lib.VALIDATION]
        scored = task.summarize(task.distillation.outputs(values), labels, datasets.labels.names)

        def headline(result):
            return {key: result[key] for key in ("loss", *task.summary_metrics) if key in result}

        block["validation"] = {
            "teacher": headline(scored),
            "student": headline(ctx.results[splits_lib.VALIDATION]),
            "agreement": task.distillation.agreement(values, outputs),
        }
    return block
