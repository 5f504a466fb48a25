"""Reading labelled text files into validated, integer-labelled splits.

Everything a user can get wrong in a data file is caught here, before TensorFlow builds a graph,
with the file, row and column in the message. Rows are numbered from 1 = the first data row
(the header is not counted), the way spreadsheet users and `pandas.read_csv` see them.
"""
import dataclasses
import io as _io
import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from trainer import storage
from trainer.config import Config, DataConfig
from trainer.errors import UserError

TEXT_COLUMNS = ("bodyText", "text", "sentence", "tweet", "review", "content")
LABEL_COLUMNS = ("sentiment", "label", "labels", "target", "class", "category")
SCORE_NAMES = ("negative", "neutral", "positive")
FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
# Used when no data flag is given: 360 short posts in the seed schema (bodyText, sentiment score),
# already split 80/10/10 by `trainer.prepare`.
SAMPLE_DIR = os.path.join(os.path.dirname(__file__), "sample_data")
SAMPLE_FILES = {split: os.path.join(SAMPLE_DIR, f"{split}.csv") for split in ("train", "eval", "test")}


@dataclasses.dataclass
class Split:
    texts: np.ndarray  # object array of str
    labels: np.ndarray  # int32 class ids
    source: str  # for messages and metrics.json
    rows_skipped: int = 0

    def __len__(self):
        return len(self.texts)


@dataclasses.dataclass
class LabelSpec:
    """How raw label values become class ids; learned from the training file, saved with the run."""
    kind: str  # "score" | "index" | "name"
    names: List[str]

    def to_dict(self):
        return {"kind": self.kind, "names": list(self.names)}


@dataclasses.dataclass
class Datasets:
    train: Split
    validation: Split
    test: Optional[Split]
    labels: LabelSpec
    text_column: str
    label_column: str

    def sizes(self) -> Dict[str, int]:
        return {name: len(split) for name, split in self.splits().items()}

    def rows_skipped(self) -> Dict[str, int]:
        return {name: split.rows_skipped for name, split in self.splits().items()}

    def splits(self) -> Dict[str, Split]:
        out = {"train": self.train, "validation": self.validation}
        if self.test is not None:
            out["test"] = self.test
        return out


# --------------------------------------------------------------------------- reading files

def file_format(path: str, flag: str) -> str:
    ext = os.path.splitext(path.lower())[1]
    if ext not in FORMATS:
        raise UserError(f"{flag}: cannot tell the format of {path} from its extension {ext!r}; "
                        f"use one of {', '.join(sorted(FORMATS))}")
    return FORMATS[ext]


def _decode(raw: bytes, path: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise UserError(f"{path}: line {line} is not valid UTF-8 (byte {raw[e.start]:#04x} at "
                        f"offset {e.start}); save the file as UTF-8") from None


def read_table(path: str, flag: str) -> pd.DataFrame:
    """One file as a DataFrame of strings (labels are parsed later, with row numbers)."""
    fmt = file_format(path, flag)
    try:
        raw = storage.read_bytes(path)
    except Exception as e:  # tf.errors.* from gfile: permission, network, ...
        raise UserError(f"{flag}: cannot read {path}: {getattr(e, 'message', e)}") from None
    text = _decode(raw, path)
    if not text.strip():
        raise UserError(f"{path}: file is empty")
    if fmt == "jsonl":
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{path}: line {number} is not valid JSON ({e.msg})") from None
            if not isinstance(record, dict):
                raise UserError(f"{path}: line {number} is not a JSON object")
            records.append(record)
        frame = pd.DataFrame.from_records(records)
        frame = frame.astype(object).where(frame.notna(), None)
    else:
        try:
            frame = pd.read_csv(_io.StringIO(text), sep="," if fmt == "csv" else "\t", dtype=str,
                                keep_default_na=False, na_values=[], skip_blank_lines=True)
        except pd.errors.ParserError as e:
            raise UserError(f"{path}: not a valid {fmt.upper()} file: {e}") from None
    if frame.empty:
        raise UserError(f"{path}: file has a header but no data rows")
    return frame


def read_files(spec: str, flag: str) -> pd.DataFrame:
    """All files of one split, with `_file` and `_row` columns for error messages."""
    frames = []
    for path in storage.expand_paths(spec, flag):
        frame = read_table(path, flag)
        frame["_file"] = path
        frame["_row"] = np.arange(1, len(frame) + 1)
        frames.append(frame)
    columns = [c for c in frames[0].columns]
    for frame in frames[1:]:
        missing = [c for c in columns if c not in frame.columns and not c.startswith("_")]
        if missing:
            raise UserError(f"{flag}: {frame['_file'].iloc[0]} lacks columns {missing} that "
                            f"{frames[0]['_file'].iloc[0]} has")
    return pd.concat(frames, ignore_index=True)


def _where(frame: pd.DataFrame, index: int, column: str) -> str:
    return f"{frame['_file'].iloc[index]} row {frame['_row'].iloc[index]}, column {column!r}"


def pick_column(frame: pd.DataFrame, requested: Optional[str], candidates: Sequence[str],
                flag: str, what: str) -> str:
    columns = [c for c in frame.columns if not str(c).startswith("_")]
    source = frame["_file"].iloc[0]
    if requested is not None:
        if requested not in columns:
            raise UserError(f"{flag}: column {requested!r} is not in {source}; its columns are "
                            f"{columns}")
        return requested
    lowered = {str(c).lower(): c for c in columns}
    for name in candidates:
        if name.lower() in lowered:
            return lowered[name.lower()]
    raise UserError(f"{source}: no {what} column found (looked for {', '.join(candidates)}); its "
                    f"columns are {columns}. Name one with {flag}.")


# --------------------------------------------------------------------------- labels

def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or (
        isinstance(value, str) and value.strip().lower() in ("", "nan", "null", "none", "na"))


def _as_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def infer_labels(frame: pd.DataFrame, column: str, config: DataConfig) -> LabelSpec:
    """Decide what the label column holds, from the training file."""
    given_names = [n.strip() for n in config.label_names.split(",")] if config.label_names else None
    values = frame[column].tolist()
    for i, value in enumerate(values):
        if _is_missing(value):
            raise UserError(f"{_where(frame, i, column)}: label is missing")
    kind = config.label_type
    if kind == "auto":
        numbers = [_as_number(v) for v in values]
        numeric = [x for x in numbers if x is not None]
        if len(numeric) * 2 < len(values):
            kind = "name"
        elif all(x is not None and x == int(x) and x >= 0 for x in numbers):
            kind = "index"
        else:
            kind = "score"
    if kind == "score":
        names = given_names or list(SCORE_NAMES)
        if len(names) != 3:
            raise UserError(f"--label-names: sentiment scores map to three classes, got {names}")
    elif kind == "index":
        ids = [_as_number(v) for v in values]
        bad = next((i for i, x in enumerate(ids) if x is None or x != int(x) or x < 0), None)
        if bad is not None:
            raise UserError(f"{_where(frame, bad, column)}: {values[bad]!r} is not a class id "
                            f"(0, 1, 2, ...)")
        count = int(max(ids)) + 1
        if given_names and count > len(given_names):
            bad = next(i for i, x in enumerate(ids) if x >= len(given_names))
            raise UserError(f"{_where(frame, bad, column)}: class id {int(ids[bad])} but "
                            f"--label-names names only {len(given_names)} classes")
        names = given_names or [str(i) for i in range(count)]
    else:
        seen = sorted({str(v).strip() for v in values})
        if given_names:
            unknown = [s for s in seen if s not in given_names]
            if unknown:
                bad = next(i for i, v in enumerate(values) if str(v).strip() == unknown[0])
                raise UserError(f"{_where(frame, bad, column)}: label {unknown[0]!r} is not one "
                                f"of --label-names {given_names}")
        names = given_names or seen
    return LabelSpec(kind, names)


def encode_labels(frame: pd.DataFrame, column: str, spec: LabelSpec, split_name: str) -> np.ndarray:
    """Raw label values -> class ids under `spec`; unknown or malformed values are errors."""
    ids = np.empty(len(frame), dtype=np.int32)
    index = {name: i for i, name in enumerate(spec.names)}
    for i, value in enumerate(frame[column].tolist()):
        if _is_missing(value):
            raise UserError(f"{_where(frame, i, column)}: label is missing")
        if spec.kind == "name":
            key = str(value).strip()
            if key not in index:
                raise UserError(f"{_where(frame, i, column)}: label {key!r} never appears in the "
                                f"training data (labels: {spec.names})")
            ids[i] = index[key]
            continue
        number = _as_number(value)
        if number is None:
            raise UserError(f"{_where(frame, i, column)}: {value!r} is not a number")
        if spec.kind == "score":
            if not -1.0 <= number <= 1.0:
                raise UserError(f"{_where(frame, i, column)}: sentiment score {number} is outside "
                                f"[-1, 1]")
            ids[i] = 0 if number < 0 else (1 if number == 0 else 2)
        else:
            if number != int(number) or not 0 <= number < len(spec.names):
                where = "in the training data" if split_name != "train" else "in --label-names"
                raise UserError(f"{_where(frame, i, column)}: class id {value!r} is not among "
                                f"the {len(spec.names)} classes {where} (labels: {spec.names})")
            ids[i] = int(number)
    return ids


# --------------------------------------------------------------------------- splits

def to_split(frame: pd.DataFrame, text_column: str, label_column: str, spec: LabelSpec,
             split_name: str, skip_empty_text: bool) -> Split:
    if text_column not in frame.columns:
        raise UserError(f"{frame['_file'].iloc[0]}: no column {text_column!r} (the training "
                        f"data's text column); its columns are "
                        f"{[c for c in frame.columns if not str(c).startswith('_')]}")
    if label_column not in frame.columns:
        raise UserError(f"{frame['_file'].iloc[0]}: no column {label_column!r} (the training "
                        f"data's label column); its columns are "
                        f"{[c for c in frame.columns if not str(c).startswith('_')]}")
    texts = frame[text_column].tolist()
    empty = [i for i, t in enumerate(texts) if _is_missing(t) or not str(t).strip()]
    if empty and not skip_empty_text:
        raise UserError(f"{_where(frame, empty[0], text_column)}: text is empty "
                        f"({len(empty)} such rows in this split); fix them or pass "
                        f"--skip-empty-text to skip them")
    if empty:
        frame = frame.drop(index=frame.index[empty]).reset_index(drop=True)
        if frame.empty:
            raise UserError(f"{split_name}: every row has empty text")
    labels = encode_labels(frame, label_column, spec, split_name)
    source = ",".join(sorted(set(frame["_file"])))
    return Split(np.array([str(t) for t in frame[text_column]], dtype=object), labels,
                 source, rows_skipped=len(empty))


def stratified_split(split: Split, fraction: float, seed: int, what: str):
    """(rest, held_out): `fraction` of each class held out."""
    from sklearn.model_selection import train_test_split

    counts = np.bincount(split.labels)
    rare = [i for i, c in enumerate(counts) if 0 < c < 2]
    if rare:
        raise UserError(f"{split.source}: class id {rare[0]} has a single example, too few to "
                        f"carve a stratified {what}; add examples or give the split as a file")
    try:
        rest, held = train_test_split(np.arange(len(split)), test_size=fraction,
                                      random_state=seed, stratify=split.labels)
    except ValueError as e:
        raise UserError(f"{split.source}: cannot carve a stratified {what} of {fraction:.0%}: {e}") from None
    return _subset(split, np.sort(rest)), _subset(split, np.sort(held))


def _subset(split: Split, index: np.ndarray, rows_skipped: int = None) -> Split:
    return Split(split.texts[index], split.labels[index], split.source,
                 split.rows_skipped if rows_skipped is None else rows_skipped)


def load_datasets(config: Config) -> Datasets:
    """Read, validate and split the data named by the config (the sample posts by default)."""
    d = config.data
    if d.training_file is None:
        if d.validation_file or d.testing_file:
            raise UserError("--training-file: required when --validation-file or --testing-file is given")
        d = dataclasses.replace(d, training_file=SAMPLE_FILES["train"],
                                validation_file=SAMPLE_FILES["eval"], testing_file=SAMPLE_FILES["test"])
    train_frame = read_files(d.training_file, "--training-file")
    text_column = pick_column(train_frame, d.text_column, TEXT_COLUMNS, "--text-column", "text")
    label_column = pick_column(train_frame, d.label_column, LABEL_COLUMNS, "--label-column", "label")
    spec = infer_labels(train_frame, label_column, d)
    train = to_split(train_frame, text_column, label_column, spec, "train", d.skip_empty_text)
    present = np.unique(train.labels)
    if len(present) < 2:
        raise UserError(f"{train.source}: training data holds a single class "
                        f"({spec.names[present[0]]!r}); a classifier needs at least two")

    if d.validation_file:
        frame = read_files(d.validation_file, "--validation-file")
        validation = to_split(frame, text_column, label_column, spec, "validation", d.skip_empty_text)
    else:
        train, validation = stratified_split(train, d.validation_fraction, config.train.seed,
                                             "validation split")
        validation.rows_skipped = 0
    test = None
    if d.testing_file:
        frame = read_files(d.testing_file, "--testing-file")
        test = to_split(frame, text_column, label_column, spec, "test", d.skip_empty_text)
    if d.train_fraction < 1.0:
        kept, _ = stratified_split(train, 1.0 - d.train_fraction, config.train.seed,
                                   "--train-fraction subset")
        train = kept
    if config.train.dry_run:
        rows = max(2, config.train.batch_size)
        train, validation = _head(train, rows), _head(validation, rows)
        test = _head(test, rows) if test is not None else None
    return Datasets(train, validation, test, spec, text_column, label_column)


def _head(split: Split, rows: int) -> Split:
    return _subset(split, np.arange(min(rows, len(split))))


def class_weights(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Inverse-frequency weights with mean 1 over the examples (sklearn's 'balanced')."""
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    weights = np.where(counts > 0, len(labels) / (num_classes * np.maximum(counts, 1)), 0.0)
    return weights.astype(np.float32)
