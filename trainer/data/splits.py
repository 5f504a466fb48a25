"""Labelled splits: train, validation and test, read, validated and carved as the config says."""
import dataclasses
import logging
import os
from typing import Dict, Optional

import numpy as np

from trainer.config import Config, task_name
from trainer.data import labels as labels_lib
from trainer.data.labels import LabelSpec
from trainer.data.reading import LABEL_COLUMNS, pick_column, pick_text_columns, read_files, where
from trainer.errors import UserError

log = logging.getLogger("trainer")

# Used when no data flag is given: 360 short posts in the seed schema (bodyText, sentiment score),
# already split 80/10/10 by `trainer.prepare`.
SAMPLE_DIR = os.path.join(os.path.dirname(__file__), "sample_data")
SAMPLE_FILES = {split: os.path.join(SAMPLE_DIR, f"{split}.csv") for split in ("train", "eval", "test")}


@dataclasses.dataclass
class Split:
    texts: np.ndarray  # object array of str
    labels: np.ndarray  # int32 class ids; float32 targets for regression
    source: str  # for messages and metrics.json
    rows_skipped: int = 0
    pairs: Optional[np.ndarray] = None  # object array of str: each row's second text, or None

    def __len__(self):
        return len(self.texts)


@dataclasses.dataclass
class Datasets:
    train: Split
    validation: Split
    test: Optional[Split]
    labels: LabelSpec
    text_column: str
    label_column: str
    text_pair_column: Optional[str] = None

    def sizes(self) -> Dict[str, int]:
        return {name: len(split) for name, split in self.splits().items()}

    def rows_skipped(self) -> Dict[str, int]:
        return {name: split.rows_skipped for name, split in self.splits().items()}

    def splits(self) -> Dict[str, Split]:
        out = {"train": self.train, "validation": self.validation}
        if self.test is not None:
            out["test"] = self.test
        return out

    def class_counts(self) -> Dict[str, Dict[str, int]]:
        """{split: {class name: rows}}, for the log and metrics.json."""
        return {name: labels_lib.class_counts(split.labels, self.labels)
                for name, split in self.splits().items()}


def to_split(frame, text_column: str, label_column: str, spec: LabelSpec,
             split_name: str, skip_empty_text: bool, min_examples: int = 0,
             pair_column: Optional[str] = None) -> Split:
    """Texts (and pairs) and class ids of one split; with `min_examples`, every class present
    has that many."""
    for column, what in ((text_column, "text"), (pair_column, "text pair")):
        if column is not None and column not in frame.columns:
            raise UserError(f"{frame['_file'].iloc[0]}: no column {column!r} (the training "
                            f"data's {what} column); its columns are "
                            f"{[c for c in frame.columns if not str(c).startswith('_')]}")
    for column in (spec.names if spec.kind == "columns" else [label_column]):
        if column not in frame.columns:
            raise UserError(f"{frame['_file'].iloc[0]}: no column {column!r} (the training "
                            f"data's label column); its columns are "
                            f"{[c for c in frame.columns if not str(c).startswith('_')]}")
    empty, column = _empty_rows(frame, text_column, pair_column)
    if empty and not skip_empty_text:
        raise UserError(f"{where(frame, empty[0], column)}: text is empty "
                        f"({len(empty)} such rows in this split); fix them or pass "
                        f"--skip-empty-text to skip them")
    if empty:
        frame = frame.drop(index=frame.index[empty]).reset_index(drop=True)
        if frame.empty:
            raise UserError(f"{split_name}: every row has empty text")
    labels = labels_lib.encode_labels(frame, label_column, spec, split_name)
    if min_examples:
        labels_lib.check_class_sizes(frame, label_column, labels, spec, min_examples)
    source = ",".join(sorted(set(frame["_file"])))
    strings = lambda column: np.array([str(t) for t in frame[column]], dtype=object)  # noqa: E731
    return Split(strings(text_column), labels, source, rows_skipped=len(empty),
                 pairs=strings(pair_column) if pair_column else None)


def _empty_rows(frame, text_column: str, pair_column: Optional[str]):
    """(rows where the text or the pair is empty, the column of the first such row)."""
    blank = lambda column: [labels_lib.is_missing(t) or not str(t).strip()  # noqa: E731
                            for t in frame[column].tolist()]
    texts = blank(text_column)
    pairs = blank(pair_column) if pair_column else [False] * len(texts)
    empty = [i for i, (a, b) in enumerate(zip(texts, pairs)) if a or b]
    column = text_column if not empty or texts[empty[0]] else pair_column
    return empty, column


def stratified_split(split: Split, fraction: float, seed: int, what: str, names: list):
    """(rest, held_out): `fraction` of each class held out (of the rows, for regression)."""
    from sklearn.model_selection import train_test_split

    if split.labels.dtype.kind == "f":
        rest, held = train_test_split(np.arange(len(split)), test_size=fraction, random_state=seed)
        return _subset(split, np.sort(rest)), _subset(split, np.sort(held))
    counts = np.bincount(split.labels)
    rare = [i for i, c in enumerate(counts) if 0 < c < 2]
    if rare:
        raise UserError(f"{split.source}: class {names[rare[0]]!r} has a single example, too few "
                        f"to carve a stratified {what}; add examples or give the split as a file")
    try:
        rest, held = train_test_split(np.arange(len(split)), test_size=fraction,
                                      random_state=seed, stratify=split.labels)
    except ValueError as e:
        raise UserError(f"{split.source}: cannot carve a stratified {what} of {fraction:.0%}: {e}") from None
    return _subset(split, np.sort(rest)), _subset(split, np.sort(held))


def _subset(split: Split, index: np.ndarray, rows_skipped: int = None) -> Split:
    return Split(split.texts[index], split.labels[index], split.source,
                 split.rows_skipped if rows_skipped is None else rows_skipped,
                 pairs=None if split.pairs is None else split.pairs[index])


def load_datasets(config: Config) -> Datasets:
    """Read, validate and split the data named by the config (the sample posts by default)."""
    d = config.data
    if d.training_file is None:
        if d.validation_file or d.testing_file:
            raise UserError("--training-file: required when --validation-file or --testing-file is given")
        d = dataclasses.replace(d, training_file=SAMPLE_FILES["train"],
                                validation_file=SAMPLE_FILES["eval"], testing_file=SAMPLE_FILES["test"])
    train_frame = read_files(d.training_file, "--training-file")
    text_column, pair_column = pick_text_columns(train_frame, d.text_column, d.text_pair_column)
    task = task_name(config)
    regression = task == "regression"
    if task == "multi-label" and d.label_columns:
        label_column = d.label_columns
    else:
        label_column = pick_column(train_frame, d.label_column,
                                   LABEL_COLUMNS + (("score",) if regression else ()),
                                   "--label-column", "label")
    if task == "multi-label":
        spec = labels_lib.infer_multi_labels(train_frame, label_column, d)
    else:
        spec = (labels_lib.regression_labels() if regression
                else labels_lib.infer_labels(train_frame, label_column, d))
    if d.min_examples_per_class < 1:
        raise UserError(f"--min-examples-per-class: must be at least 1, got {d.min_examples_per_class}")
    train = to_split(train_frame, text_column, label_column, spec, "train", d.skip_empty_text,
                     min_examples=0 if task != "classification" else d.min_examples_per_class,
                     pair_column=pair_column)
    present = np.unique(train.labels)
    if task == "classification" and len(present) < 2:
        raise UserError(f"{train.source}: training data holds a single class "
                        f"({spec.names[present[0]]!r}); a classifier needs at least two")

    if d.validation_file:
        frame = read_files(d.validation_file, "--validation-file")
        validation = to_split(frame, text_column, label_column, spec, "validation",
                              d.skip_empty_text, pair_column=pair_column)
    else:
        train, validation = stratified_split(train, d.validation_fraction, config.train.seed,
                                             "validation split", spec.names)
        validation.rows_skipped = 0
    test = None
    if d.testing_file:
        frame = read_files(d.testing_file, "--testing-file")
        test = to_split(frame, text_column, label_column, spec, "test", d.skip_empty_text,
                        pair_column=pair_column)
    if d.train_fraction < 1.0:
        kept, _ = stratified_split(train, 1.0 - d.train_fraction, config.train.seed,
                                   "--train-fraction subset", spec.names)
        train = kept
    if config.train.dry_run:
        rows = max(2, config.train.batch_size)
        train, validation = _head(train, rows), _head(validation, rows)
        test = _head(test, rows) if test is not None else None
    datasets = Datasets(train, validation, test, spec, text_column, label_column, pair_column)
    for name, counts in datasets.class_counts().items():
        if counts:  # regression has no classes
            log.info("%s classes: %s", name,
                     ", ".join(f"{label} {count}" for label, count in counts.items()))
    return datasets


def _head(split: Split, rows: int) -> Split:
    return _subset(split, np.arange(min(rows, len(split))))


def class_weights(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Inverse-frequency weights with mean 1 over the examples (sklearn's 'balanced')."""
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    weights = np.where(counts > 0, len(labels) / (num_classes * np.maximum(counts, 1)), 0.0)
    return weights.astype(np.float32)
