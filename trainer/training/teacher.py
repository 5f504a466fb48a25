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
from trainer.data import teacher_file, unlabeled
from trainer.errors import UserError
from trainer.tasks import parts
from trainer.training import context, tagger_teacher
from trainer.training.context import RunContext

log = logging.getLogger("trainer")

WAIT_SECONDS = 6 * 3600  # a worker waits at most this long for the chief's teacher file
PREDICT_BATCH = 64
# Rows predicted between two looks at the progress clock: a file's chunk is 50,000 rows, which a
# large teacher takes 20 minutes over on 2 cores.
PROGRESS_ROWS = 1024


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
    rows = tagger_teacher if ctx.task.unit == "word" else _Texts
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


class _Texts:
    """The teacher of rows that are texts (or pairs): a CSV of trainer.predict's columns. (Of
    tagged sentences: training/tagger_teacher.py, a module of the same names.)"""

    noun, suffix = "texts", "csv"

    @staticmethod
    def unlabeled(spec: str, datasets):
        held_out = {name: split.hashes for name, split in datasets.labelled().items() if name != splits_lib.TRAIN}
        return unlabeled.load(spec, datasets.text_columns(), datasets.delimiter, held_out)

    @staticmethod
    def values(path: str, datasets, task, flag: str) -> tuple:
        """({split: the teacher's values} of the training and unlabeled rows, the validation
        rows' or None)."""
        teacher = teacher_file.read(
            path, datasets.text_columns(), task.distillation.columns(datasets.labels.names), datasets.delimiter, flag
        )
        values = {
            name: _match(teacher, datasets, name, task, flag)
            for name in (splits_lib.TRAIN, splits_lib.UNLABELED)
            if name in datasets.splits()
        }
        return values, _validation_values(teacher, datasets, task, flag)

    @staticmethod
    def write(model_dir: str, datasets, path: str, log_every_seconds: float, task) -> None:
        _run_teacher(model_dir, datasets, path, log_every_seconds, task.distillation.columns(datasets.labels.names))


def _match(teacher, datasets, name: str, task, flag: str) -> np.ndarray:
    split = datasets.splits()[name]
    return teacher_file.match(
        teacher, split.hashes, name, lambda row: _text_of(datasets, name, row), task.distillation.problem, flag
    )


def _text_of(datasets, name: str, row: int) -> str:
    """A split's row's text (and pair), for an error message: read back from its file."""
    texts, pairs = datasets.read_texts(name)[name]
    return texts[row] if pairs is None else f"{texts[row]} | {pairs[row]}"


def _validation_values(teacher, datasets, task, flag: str) -> np.ndarray | None:
    """The teacher's values of the validation rows, when its file has them all (a model
    teacher's does): its metrics beside the student's."""
    rows = teacher.lookup(datasets.validation.hashes)
    if (rows < 0).any():
        log.info(
            "distillation: %s lacks %d of the validation texts: the teacher's validation metrics are not reported",
            teacher.source,
            int((rows < 0).sum()),
        )
        return None
    return _match(teacher, datasets, splits_lib.VALIDATION, task, flag)


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


def _run_teacher(model_dir: str, datasets, path: str, log_every_seconds: float, wanted: list) -> None:
    """The teacher's outputs of every training, unlabeled and validation text, as
    trainer.predict writes them: the text columns, then the model's columns (`wanted` among
    them, checked on one text before the teacher reads them all)."""
    import pandas as pd

    from trainer import progress
    from trainer.serving import predict_file, variants

    started = time.monotonic()
    model = variants.load(model_dir, "float32")
    _check_outputs(model, model_dir, datasets, wanted)
    names = [n for n in (splits_lib.TRAIN, splits_lib.UNLABELED, splits_lib.VALIDATION) if n in datasets.splits()]
    total = sum(len(datasets.splits()[n]) for n in names)
    log.info(
        "teacher: %s loaded in %s; predicting %d texts", model_dir, progress.clock(time.monotonic() - started), total
    )
    meter, done, columns = (
        progress.Progress("teacher predicted", log_every_seconds, total=total),
        0,
        datasets.text_columns(),
    )
    with predict_file.written_output(path, "csv") as handle:
        for chunk in _chunks(datasets, names):
            for start in range(0, len(chunk), PROGRESS_ROWS):
                part = chunk.iloc[start : start + PROGRESS_ROWS]
                frame = pd.DataFrame({c: part[c].astype(str).tolist() for c in columns})
                texts = frame[columns[0]].tolist()
                pairs = frame[columns[1]].tolist() if len(columns) > 1 else None
                predict_file.add_predictions(frame, model, texts, PREDICT_BATCH, pairs)
                predict_file.write_frame(frame, handle, "csv", first=done == 0)
                done += len(frame)
                meter.update(done)
    seconds = meter.seconds()
    log.info(
        "teacher: %d texts in %s (%.1f texts/s), written to %s",
        done,
        progress.clock(seconds),
        done / max(seconds, 1e-9),
        path,
    )


def _check_outputs(model, model_dir: str, datasets, wanted: list) -> None:
    """A teacher of another task or other labels, refused before it runs over every text."""
    import pandas as pd

    from trainer.serving import predict_file

    frame = pd.DataFrame({"text": ["a"]})
    predict_file.add_predictions(frame, model, ["a"], 1, ["a"] if datasets.text_pair_column else None)
    found = teacher_file.output_columns(frame.columns)
    if sorted(found) != sorted(wanted):
        raise UserError(
            f"--teacher: {model_dir} outputs {found}, but this run needs {list(wanted)}: "
            f"the teacher's task or labels differ from the data's"
        )


def _chunks(datasets, names: list):
    """Each chunk of the named splits' rows, reading each file once."""
    by_spec = {}
    for name in names:
        split = datasets.splits()[name]
        by_spec.setdefault(split.spec, {})[name] = split.positions
    for spec, positions in by_spec.items():
        for _, chunk in datasets.selected_chunks(spec, positions):
            yield chunk


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
    if teacher.validation is not None and splits_lib.VALIDATION in ctx.outputs:
        outputs, labels = ctx.outputs[splits_lib.VALIDATION]
        scored = task.summarize(task.distillation.outputs(teacher.validation), labels, datasets.labels.names)

        def headline(result):
            return {key: result[key] for key in ("loss", *task.summary_metrics) if key in result}

        block["validation"] = {
            "teacher": headline(scored),
            "student": headline(ctx.results[splits_lib.VALIDATION]),
            "agreement": task.distillation.agreement(teacher.validation, outputs),
        }
    return block
