"""The teacher stage's rows when they are texts (or pairs): a CSV of trainer.predict's columns,
read by data/teacher_file.py, and what a --teacher model writes in that format. The same five
names as tasks/tagging/teacher.py's for tagged sentences (`noun`, `suffix`, `unlabeled`,
`values`, `write`): the unit's `teacher` (trainer.training.teacher asks it)."""

import logging
import time

import numpy as np

from trainer.data import splits as splits_lib
from trainer.data import teacher_file
from trainer.data import unlabeled as unlabeled_file
from trainer.errors import UserError

log = logging.getLogger("trainer")

noun, suffix = "texts", "csv"
PREDICT_BATCH = 64
# Rows predicted between two looks at the progress clock: a file's chunk is 50,000 rows, which a
# large teacher takes 20 minutes over on 2 cores.
PROGRESS_ROWS = 1024


def unlabeled(spec: str, datasets):
    """--unlabeled-file's rows, none a validation or test text."""
    held_out = {name: split.hashes for name, split in datasets.labelled().items() if name != splits_lib.TRAIN}
    return unlabeled_file.load(spec, datasets.text_columns(), datasets.delimiter, held_out)


def values(path: str, datasets, task, flag: str) -> tuple:
    """({split: the teacher's values} of the training and unlabeled rows, the validation
    rows' or None)."""
    teacher = teacher_file.read(
        path, datasets.text_columns(), task.distillation.columns(datasets.labels.names), datasets.delimiter, flag
    )
    found = {
        name: _match(teacher, datasets, name, task, flag)
        for name in (splits_lib.TRAIN, splits_lib.UNLABELED)
        if name in datasets.splits()
    }
    return found, _validation_values(teacher, datasets, task, flag)


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
    found = teacher_file.output_columns(frame.columns, wanted)
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
