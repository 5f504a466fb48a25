"""A labelled file read for an export (trainer.evaluate), by the rules training reads a split by.

Texts and labels come from a CSV, TSV, JSON Lines or JSON file's columns (trainer.reading, the
text columns found as trainer.predict finds them, the label columns as training does: read_texts),
or as the model's task's unit reads its rows (Unit.labelled_rows: a tagger's, a file of tagged
sentences as training reads them).
The file is read whole before the model loads, so a broken line or a missing column is one line
at once; its labels are encoded (Unit.labels_of) once the export has told its label names, each unknown one an
error naming its file, line and column (or token).

How the labels are read is the run's when the model dir is a finished run's JOB_DIR/model
(serving.columns.run_dir): its config.json's label flags and metrics.json's `label_kind`. A
model dir on its own is read with the defaults (--label-column and --label-columns name the
columns), its kind of labels decided from the file by training's own rule (Task.label_spec).
A row whose text is empty is skipped and counted: trainer.predict gives it no prediction.
"""

import dataclasses
import json

import numpy as np

from trainer import config as config_lib
from trainer import reading, storage
from trainer.errors import UserError
from trainer.inference import loaded_model
from trainer.serving import columns as trained
from trainer.serving import predict_file

CHUNK_ROWS = 8192


@dataclasses.dataclass
class LabelledFile:
    path: str
    texts: np.ndarray  # object array of str, the rows kept (their text is not empty)
    pairs: np.ndarray | None  # a pair model's second texts, or None
    frame: object  # a text task's label columns, `_file` and `_row` of the rows kept; or None
    tagged: object  # a task of words' tasks.tagging.files.Tagged; or None
    label_column: str  # for messages and the metrics: the label column, or the tags
    label_columns: list
    data: config_lib.DataConfig  # how the labels are read: the run's flags, or the defaults
    label_kind: str | None  # the run's metrics.json `label_kind`, when known
    skipped: int  # rows with an empty text


def run_record(model_dir: str) -> tuple:
    """(the run's DataConfig, its metrics.json `label_kind`) when `model_dir` is a finished
    run's export, else (the defaults, None)."""
    job_dir = trained.run_dir(model_dir)
    config_path = job_dir and storage.join(job_dir, "config.json")
    if not config_path or not storage.exists(config_path):
        return config_lib.DataConfig(), None
    metrics_path = storage.join(job_dir, "metrics.json")
    try:
        kind = json.loads(storage.read_text(metrics_path)).get("label_kind")
    except (json.JSONDecodeError, AttributeError):
        raise UserError(
            f"{metrics_path}: not a JSON object of metrics; the model's labels are read as it says"
        ) from None
    return config_lib.load(config_path).data, kind


def read(args, task, pair: bool) -> LabelledFile:
    """--input's rows and labels as `task`'s model reads them (`pair`: it takes text pairs);
    `args`: trainer.evaluate's flags."""
    data, kind = run_record(args.model_dir)
    data = dataclasses.replace(
        data, **{flag: getattr(args, flag) for flag in ("label_column", "label_columns") if getattr(args, flag)}
    )
    if args.label_columns:
        kind = None  # named here: the file's, not the run's
    return task.unit.labelled_rows(args, task, pair, data, kind)


def read_texts(args, task, pair: bool, data, kind) -> LabelledFile:
    """--input's rows of texts (or pairs) and their label columns (the text unit's labelled_rows)."""
    import pandas as pd

    texts, pairs, frames, skipped, columns, label_columns = [], [], [], 0, None, None
    for frame in reading.file_frames(args.input, "--input", CHUNK_ROWS, args.delimiter):
        if columns is None:
            columns = predict_file.text_columns(
                frame, args, pair, trained.model_columns(args.model_dir), task.compares_pairs
            )
            pair = columns[1] is not None
            label_column, label_columns = task.label_columns(frame, data)
            _check_columns(frame, label_columns)
        strings = [["" if pd.isna(t) else str(t) for t in frame[c].tolist()] if c else None for c in columns]
        keep = ~loaded_model.empty_rows(*strings)
        skipped += int((~keep).sum())
        texts += [t for t, k in zip(strings[0], keep) if k]
        pairs += [t for t, k in zip(strings[1], keep) if k] if pair else []
        frames.append(frame.loc[keep, [*label_columns, "_file", "_row"]])
    if not texts:
        raise UserError(f"--input: {args.input}: every row has an empty text")
    frame = pd.concat(frames, ignore_index=True)
    return LabelledFile(
        args.input,
        np.array(texts, dtype=object),
        np.array(pairs, dtype=object) if pair else None,
        frame,
        None,
        label_column,
        label_columns,
        data,
        kind,
        skipped,
    )


def _check_columns(frame, label_columns) -> None:
    missing = [c for c in label_columns if c not in frame.columns]
    if missing:
        raise UserError(
            f"{frame['_file'].iloc[0]}: no label column {missing[0]!r}; its columns "
            f"are {[c for c in frame.columns if not str(c).startswith('_')]}"
        )
