"""A teacher's outputs per text, read from a file and matched to the run's rows by their texts.

The one path of both teachers: `--teacher-probabilities FILE` is read as given, and a
`--teacher MODEL_DIR` first writes such a file (trainer.training.teacher). Its columns are the
training file's text (and pair) columns, found by name as in every other file, and the columns
`trainer.predict` writes: `probability_<label>` per class or label, `predicted_score`, or the
columns a kind's distillation part names (an embedding model's vectors: a JSON list in a cell).

Rows are matched by their text's hash (trainer.data.leakage.text_hashes), so the file may hold
its rows in any order, more rows than the run needs, and a text twice (its first row counts).
Only the matched rows' values are checked, each bad one named by its file and line.
"""

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from trainer.data import leakage
from trainer.errors import UserError
from trainer.reading import conform, split_frames

FLAG = "--teacher-probabilities"
CHUNK_ROWS = 50_000
# The columns of trainer.predict's output that hold a model's outputs, by their prefix or name.
OUTPUT_PREFIX, SCORE_COLUMN = "probability_", "predicted_score"


@dataclasses.dataclass
class TeacherFile:
    """A file's rows, one per distinct text, sorted by their texts' hashes."""

    source: str
    hashes: np.ndarray  # uint64, ascending, distinct
    values: np.ndarray  # float64 [rows, outputs], in the order of the columns asked for (a vector's all its numbers)
    files: list  # the paths of the file's parts
    where: np.ndarray  # int64 [rows, 2]: (index in `files`, line) of each row, for messages

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """The row of each hash, -1 where the file has none."""
        index = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        return np.where(self.hashes[index] == hashes, index, -1)

    def row_name(self, row: int) -> str:
        file, line = self.where[row]
        return f"{self.files[file]} line {line}"


def output_columns(columns: Sequence[str], wanted: Sequence[str] = ()) -> list:
    """The columns of a file that hold a teacher's outputs: trainer.predict's probabilities and
    score, and those of `wanted` (a kind's own, Distillation.columns) it has."""
    return [c for c in columns if str(c).startswith(OUTPUT_PREFIX) or c == SCORE_COLUMN or c in wanted]


def read(
    spec: str,
    text_columns: Sequence[str | None],
    wanted: Sequence[str],
    delimiter: str | None = None,
    flag: str = FLAG,
) -> TeacherFile:
    """The rows of `spec` with their `wanted` output columns as floats. The file's output
    columns must be exactly `wanted` (in any order): a teacher with other classes, or of
    another task, is refused here, before any of its values is used."""
    used = [c for c in text_columns if c]
    hashes, values, where, files = [], [], [], []
    for frame in split_frames(spec, flag, CHUNK_ROWS, delimiter):
        frame = conform(frame, [*used, *wanted])
        path = frame["_file"].iloc[0]
        if path not in files:
            _check_columns(frame, path, used, wanted, flag)
            files.append(path)
        hashes.append(leakage.text_hashes(frame, used))
        values.append(_numbers(frame, wanted, flag))
        if values[-1].shape[1] != values[0].shape[1]:  # vectors of another length than the first chunk's
            first, width = frame["_row"].iloc[0], values[0].shape[1]
            raise UserError(f"{flag}: {path} line {first}: {values[-1].shape[1]} outputs, not {width}")
        where.append(np.stack([np.full(len(frame), files.index(path)), frame["_row"].to_numpy(np.int64)], axis=1))
    hashes = np.concatenate(hashes)
    distinct, first = np.unique(hashes, return_index=True)  # sorted; a repeated text's first row
    return TeacherFile(spec, distinct, np.concatenate(values)[first], files, np.concatenate(where)[first])


def _check_columns(frame, path: str, used: list, wanted: Sequence[str], flag: str) -> None:
    columns = [c for c in frame.columns if not str(c).startswith("_")]
    missing = [c for c in used if c not in columns]
    if missing:
        raise UserError(
            f"{flag}: {path} has no column {missing[0]!r} (the training data's text column); its columns are {columns}"
        )
    found = output_columns(columns, wanted)
    if sorted(found) != sorted(wanted):
        raise UserError(
            f"{flag}: {path} holds the teacher outputs {found}, but this run needs "
            f"{list(wanted)}: the teacher's task or labels differ from the data's"
        )


def _numbers(frame, columns: Sequence[str], flag: str) -> np.ndarray:
    """float64 [rows, outputs]: a number column's numbers (NaN where a cell is none: match
    names its row), a column of vectors' (its first cell a list) side by side."""
    import pandas as pd

    parts = [
        _vectors(frame, c, flag)
        if _holds_lists(frame[c])
        else pd.to_numeric(frame[c], errors="coerce").to_numpy(np.float64)[:, None]
        for c in columns
    ]
    return np.concatenate(parts, axis=1)


def _holds_lists(cells) -> bool:
    """A column of vectors: its first cell a list, or a JSON list as a CSV cell holds it."""
    first = cells.iloc[0] if len(cells) else None
    return isinstance(first, list) or (isinstance(first, str) and first.lstrip().startswith("["))


def _vectors(frame, column: str, flag: str) -> np.ndarray:
    """float64 [rows, width] of a column of vectors: JSON lists in a CSV cell (trainer.predict's),
    or lists as a JSON Lines file holds them. A cell that is not a list of numbers, or a list of
    another length than the first row's, is named by its file and line."""
    import json

    rows = []
    for cell, path, line in zip(frame[column], frame["_file"], frame["_row"]):
        try:
            vector = json.loads(cell) if isinstance(cell, str) else cell
            row = np.asarray(vector, np.float64)
        except (TypeError, ValueError):
            row = None
        if row is None or row.ndim != 1 or (rows and len(row) != len(rows[0])):
            wanted = f"a list of {len(rows[0])} numbers" if rows else "a list of numbers"
            raise UserError(f"{flag}: {path} line {line}: column {column!r} holds {str(cell)[:40]!r}, not {wanted}")
        rows.append(row)
    return np.stack(rows) if rows else np.zeros([0, 0])


def match(
    teacher: TeacherFile,
    hashes: np.ndarray,
    split: str,
    first_text: Callable[[int], str],
    problem: Callable,
    flag: str = FLAG,
) -> np.ndarray:
    """The teacher's values [rows, outputs] of a split's rows (their text `hashes`), checked by
    `problem(values)` (the task's Distillation.problem). A row without a match is an error giving their
    count and the first one's text (`first_text(row)`)."""
    rows = teacher.lookup(hashes)
    missing = np.flatnonzero(rows < 0)
    if len(missing):
        text = first_text(int(missing[0]))
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise UserError(
            f"{flag}: {teacher.source} has no row for {len(missing)} of the {len(rows)} {split} texts, e.g. {shown!r}"
        )
    values = teacher.values[rows]
    found = problem(values)
    if found is not None:
        index, reason = found
        raise UserError(f"{flag}: {teacher.row_name(int(rows[index]))}: {reason}")
    return values
