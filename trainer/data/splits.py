"""Labelled splits: train, validation and test, read, validated and carved as the config says."""

import dataclasses
import logging
import os
from collections.abc import Sequence

import numpy as np

from trainer import task_registry
from trainer.config import Config
from trainer.data import leakage
from trainer.data.labels import LabelSpec, is_missing
from trainer.errors import UserError
from trainer.reading import check_delimiter, conform, pick_text_columns, split_frames, where

log = logging.getLogger("trainer")

# Used when no data flag is given: 360 short posts in the seed schema (bodyText, sentiment score),
# already split 80/10/10 by `trainer.prepare`.
SAMPLE_DIR = os.path.join(os.path.dirname(__file__), "sample_data")
SAMPLE_FILES = {split: os.path.join(SAMPLE_DIR, f"{split}.csv") for split in ("train", "eval", "test")}


# Rows per chunk: files are read, validated and tokenized this many rows at a time, so memory
# holds one chunk of texts, never a whole file.
CHUNK_ROWS = 50_000


# The splits' names (Datasets.splits' keys, the token cache's folders, metrics.json's keys).
TRAIN, VALIDATION, TEST, UNLABELED = "train", "validation", "test", "unlabeled"


@dataclasses.dataclass
class Split:
    """The rows of one split: their labels, and where they are in the files (texts stay there:
    `Datasets.read_texts` and the token cache read them back as a stream)."""

    labels: np.ndarray  # int32 class ids; float32 targets for regression; [N, L] 0/1 multi-label
    source: str  # the files, for messages and metrics.json
    spec: str  # the flag's value the rows are read from (a file, a list, a glob)
    positions: np.ndarray  # int64, ascending: each row's index among the data rows of `spec`
    hashes: np.ndarray  # uint64: each row's text (and pair), to count texts two splits share
    rows_skipped: int = 0

    def __len__(self):
        return len(self.labels)

    def subset(self, index: np.ndarray) -> "Split":
        """The rows `index` of the split."""
        return dataclasses.replace(
            self, labels=self.labels[index], positions=self.positions[index], hashes=self.hashes[index]
        )


@dataclasses.dataclass
class Datasets:
    train: Split
    validation: Split
    test: Split | None
    labels: LabelSpec
    text_column: str
    label_column: str
    text_pair_column: str | None = None
    delimiter: str | None = None  # --delimiter, to read the files again
    # --unlabeled-file's rows, which a teacher labels (trainer.training.teacher), or None
    unlabeled: Split | None = None
    # --negative-column: a third text of each row (an embedding pair's hard negative), or None
    negative_column: str | None = None

    def sizes(self) -> dict[str, int]:
        """Rows per labelled split (metrics.json's dataset_sizes; the unlabeled rows are
        distillation's, counted in its block)."""
        return {name: len(split) for name, split in self.labelled().items()}

    def rows_skipped(self) -> dict[str, int]:
        return {name: split.rows_skipped for name, split in self.labelled().items()}

    def labelled(self) -> dict[str, Split]:
        """The train, validation and (if any) test splits."""
        out = {TRAIN: self.train, VALIDATION: self.validation}
        if self.test is not None:
            out[TEST] = self.test
        return out

    def splits(self) -> dict[str, Split]:
        """Every set of rows the run reads: the labelled splits and the unlabeled rows (what the
        token cache tokenizes)."""
        if self.unlabeled is None:
            return self.labelled()
        return {**self.labelled(), UNLABELED: self.unlabeled}

    def class_counts(self, task) -> dict[str, dict[str, int]]:
        """{split: {class name: rows}} (Task.label_counts), for the log and metrics.json."""
        return {
            name: task.label_counts(task.plain(split.labels), self.labels) for name, split in self.labelled().items()
        }

    def text_columns(self) -> list:
        """The columns of a row's texts, in the order they are tokenized: text, pair, negative."""
        return [c for c in (self.text_column, self.text_pair_column, self.negative_column) if c]

    def describe(self, task) -> str:
        """What the run reads, for the log: its columns, and its labels as `task` reads them."""
        pair = f", pair {self.text_pair_column!r}" if self.text_pair_column else ""
        pair += f", hard negative {self.negative_column!r}" if self.negative_column else ""
        return f"text {self.text_column!r}{pair}, label {self.label_column!r} as {task.describe_labels(self.labels)}"

    def read_texts(self, *names: str) -> dict[str, tuple]:
        """{name: (texts, pairs or None)} of some splits as object arrays, in row order. Splits
        carved from one file (validation and test from --training-file) come from one pass over it."""
        splits, by_file, parts = self.splits(), {}, {name: [] for name in names}
        for name in names:
            by_file.setdefault(splits[name].spec, {})[name] = splits[name].positions
        for spec, positions in by_file.items():
            for name, chunk in self.selected_chunks(spec, positions):
                parts[name].append(chunk)
        column = lambda chunks, c: np.array([str(t) for part in chunks for t in part[c]], dtype=object)  # noqa: E731
        return {
            name: (
                column(chunks, self.text_column),
                column(chunks, self.text_pair_column) if self.text_pair_column else None,
            )
            for name, chunks in parts.items()
        }

    def selected_chunks(self, spec: str, positions: dict[str, np.ndarray], chunk_rows: int = CHUNK_ROWS):
        """(split name, frame of that split's rows in this chunk, its text columns named as in
        the training file) over one stream of `spec`, for splits whose rows are `positions`
        (ascending) among its data rows."""
        done = 0
        for frame in split_frames(spec, "--training-file", chunk_rows, self.delimiter):
            frame = conform(frame, self.text_columns())
            for name, wanted in positions.items():
                lo, hi = np.searchsorted(wanted, [done, done + len(frame)])
                if hi > lo:
                    yield name, frame.iloc[wanted[lo:hi] - done].reset_index(drop=True)
            done += len(frame)


@dataclasses.dataclass
class _Scan:
    """One pass over a split's files: its label columns (a compact frame with `_file`/`_row`
    for messages), which rows are kept, and how many were skipped."""

    labels: object  # pandas.DataFrame
    positions: np.ndarray
    hashes: np.ndarray
    rows_skipped: int
    source: str


def _scan(spec: str, flag: str, columns: Sequence[str], label_columns: Sequence[str], d) -> _Scan:
    """Reads a split chunk by chunk, keeping only the label columns (as categories, so that
    millions of rows cost bytes each), the positions of rows with text and their texts' hashes.
    Columns are found by the training file's names (`conform`)."""
    import pandas as pd

    kept, positions, hashes, skipped, files, done = [], [], [], 0, [], 0
    for frame in split_frames(spec, flag, CHUNK_ROWS, d.delimiter):
        frame = conform(frame, [c for c in columns if c] + list(label_columns))
        check_columns(frame, columns, label_columns)
        empty, column = _empty_rows(frame, *columns)
        if empty and not d.skip_empty_text:
            raise UserError(
                f"{where(frame, empty[0], column)}: text is empty (fix such rows or "
                f"pass --skip-empty-text to skip them)"
            )
        keep = np.ones(len(frame), bool)
        keep[empty] = False
        skipped += len(empty)
        positions.append(done + np.flatnonzero(keep))
        hashes.append(leakage.text_hashes(frame.loc[keep], columns))
        part = frame.loc[keep, list(label_columns) + ["_file", "_row"]]
        kept.append(part.astype({c: "category" for c in list(label_columns) + ["_file"]}))
        files.extend(f for f in part["_file"].unique() if f not in files)
        done += len(frame)
    if not sum(len(p) for p in positions):
        raise UserError(f"{flag}: every row has empty text")
    labels = pd.DataFrame(
        {c: pd.api.types.union_categoricals([k[c] for k in kept]) for c in list(label_columns) + ["_file"]}
    )
    labels["_row"] = np.concatenate([k["_row"].to_numpy() for k in kept])
    return _Scan(
        labels, np.concatenate(positions).astype(np.int64), np.concatenate(hashes), skipped, ",".join(sorted(files))
    )


def check_columns(frame, columns: Sequence[str | None], label_columns: Sequence[str]) -> None:
    named = [(c, what) for c, what in zip(columns, ("text", "text pair", "hard negative")) if c]
    for column, what in named + [(c, "label") for c in label_columns]:
        if column not in frame.columns:
            raise UserError(
                f"{frame['_file'].iloc[0]}: no column {column!r} (the training "
                f"data's {what} column); its columns are "
                f"{[c for c in frame.columns if not str(c).startswith('_')]}"
            )


def encode(frame, label_columns: Sequence[str], spec: LabelSpec, split_name: str, task) -> np.ndarray:
    """Labels of every row, each distinct value encoded once (errors name its first row)."""
    import pandas as pd

    group = np.zeros(len(frame), np.int64)
    for column in label_columns:
        codes, values = pd.factorize(frame[column], use_na_sentinel=False)
        group = pd.factorize(group * (len(values) + 1) + codes)[0]  # in order of appearance
    first_rows = np.unique(group, return_index=True)[1]
    distinct = frame.iloc[first_rows].reset_index(drop=True)
    return task.encode_labels(distinct, label_columns[0], spec, split_name)[group]


def _empty_rows(frame, *columns: str | None):
    """(rows where a text of `columns` (None: none) is empty, the column of the first such row)."""
    blank = {c: [is_missing(t) or not str(t).strip() for t in frame[c].tolist()] for c in columns if c}
    empty = [i for i, cells in enumerate(zip(*blank.values())) if any(cells)]
    column = next((c for c, cells in blank.items() if cells[empty[0]]), None) if empty else columns[0]
    return empty, column


def stratified_split(split: Split, fraction: float, seed: int, what: str, names: list, task):
    """(rest, held_out): `fraction` of each stratum held out (Task.held_out_strata: each class),
    or of the rows when the task has none."""
    from sklearn.model_selection import train_test_split

    strata = task.held_out_strata(split.labels)
    if strata is None:
        rest, held = train_test_split(np.arange(len(split)), test_size=fraction, random_state=seed)
        return split.subset(np.sort(rest)), split.subset(np.sort(held))
    counts = np.bincount(strata)
    rare = [i for i, c in enumerate(counts) if 0 < c < 2]
    if rare:
        raise UserError(
            f"{split.source}: class {names[rare[0]]!r} has a single example, too few "
            f"to carve a stratified {what}; add examples or give the split as a file"
        )
    # sklearn holds out ceil(fraction * rows); a tiny file (12 rows of 3 classes) would get fewer
    # rows than classes, which it refuses: hold out one row per class at least.
    held_rows = max(int(np.ceil(fraction * len(split))), int(np.count_nonzero(counts)))
    try:
        rest, held = train_test_split(np.arange(len(split)), test_size=held_rows, random_state=seed, stratify=strata)
    except ValueError as e:
        raise UserError(f"{split.source}: cannot carve a stratified {what} of {fraction:.0%}: {e}") from None
    return split.subset(np.sort(rest)), split.subset(np.sort(held))


def load_datasets(config: Config, task=None) -> Datasets:
    """Read, validate and split the data named by the config (the sample posts by default),
    one chunk at a time: only labels and row positions stay in memory. `task` reads and checks
    the labels (default: the config's)."""
    task = task or task_registry.from_config(config)
    d = config.data
    if d.training_file is None:
        if d.validation_file or d.testing_file:
            raise UserError("--training-file: required when --validation-file or --testing-file is given")
        d = dataclasses.replace(
            d,
            training_file=SAMPLE_FILES["train"],
            validation_file=SAMPLE_FILES["eval"],
            testing_file=SAMPLE_FILES["test"],
        )
    if d.min_examples_per_class < 1:
        raise UserError(f"--min-examples-per-class: must be at least 1, got {d.min_examples_per_class}")
    check_delimiter(d.delimiter)
    leakage.check_held_out_files(
        d.training_file, {"--validation-file": d.validation_file, "--testing-file": d.testing_file}
    )
    first = next(split_frames(d.training_file, "--training-file", 1, d.delimiter))
    columns = (*pick_text_columns(first, d.text_column, d.text_pair_column), d.negative_column)
    if columns[1] is not None and d.long_texts == "windows" and not task.pairs_in_windows:
        raise UserError(
            f"--long-texts windows: {d.training_file} holds pairs of texts "
            f"({columns[0]!r}, {columns[1]!r}), and windows read single texts; use "
            f"--long-texts head-tail or truncate for pairs"
        )
    label_column, label_columns = task.label_columns(first, d)
    scan = _scan(d.training_file, "--training-file", columns, label_columns, d)
    spec = label_spec(scan.labels, label_column, d, task)
    train = _split(scan, d.training_file, label_columns, spec, "train", task)
    task.check_training_labels(scan.labels, label_column, train.labels, spec, d, train.source)
    read = lambda spec_, flag, name: _split(  # noqa: E731
        _scan(spec_, flag, columns, label_columns, d), spec_, label_columns, spec, name, task
    )
    if d.validation_file:
        validation = read(d.validation_file, "--validation-file", "validation")
    else:
        train, validation = stratified_split(
            train, d.validation_fraction, config.train.seed, "validation split", spec.names, task
        )
        validation.rows_skipped = 0
    test = read(d.testing_file, "--testing-file", "test") if d.testing_file else None
    if d.train_fraction < 1.0:
        train, _ = stratified_split(
            train, 1.0 - d.train_fraction, config.train.seed, "--train-fraction subset", spec.names, task
        )
    if config.train.dry_run:
        rows = dry_run_rows(config)
        train, validation = head(train, rows), head(validation, rows)
        test = head(test, rows) if test is not None else None
    datasets = Datasets(
        train, validation, test, spec, columns[0], label_column, columns[1], d.delimiter, negative_column=columns[2]
    )
    leakage.report_overlaps({name: split.hashes for name, split in datasets.splits().items()})
    for name, counts in datasets.class_counts(task).items():
        if counts:  # regression has no classes
            log.info("%s classes: %s", name, ", ".join(f"{label} {count}" for label, count in counts.items()))
    return datasets


def label_spec(frame, column: str, d, task) -> LabelSpec:
    """What the training labels are (Task.label_spec), decided from each distinct value once."""
    distinct = frame.drop_duplicates(subset=[c for c in frame.columns if not c.startswith("_")])
    return task.label_spec(distinct.reset_index(drop=True), column, d)


def _split(scan: _Scan, spec_: str, label_columns, spec: LabelSpec, name: str, task) -> Split:
    return Split(
        encode(scan.labels, label_columns, spec, name, task),
        scan.source,
        spec_,
        scan.positions,
        scan.hashes,
        scan.rows_skipped,
    )


def dry_run_rows(config: Config) -> int:
    """The rows of each split a --dry-run reads: one batch."""
    return max(2, config.train.batch_size)


def head(split: Split, rows: int) -> Split:
    """The split's first `rows` rows."""
    return split.subset(np.arange(min(rows, len(split))))


def class_weights(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Inverse-frequency weights with mean 1 over the examples (sklearn's 'balanced')."""
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    weights = np.where(counts > 0, len(labels) / (num_classes * np.maximum(counts, 1)), 0.0)
    return weights.astype(np.float32)
