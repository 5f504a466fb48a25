"""Reading data files (CSV, TSV, JSON Lines; local or gs://) into frames of strings.

Everything a user can get wrong in a file is caught here, before TensorFlow builds a graph, with
the file, row and column in the message. Rows are numbered from 1 = the first data row (the
header is not counted), the way spreadsheet users and `pandas.read_csv` see them; lines are the
file's physical lines, for errors in the file's structure.

Every line is accounted for: it is blank, the header, or part of exactly one record with the
header's number of fields, else reading stops naming the line. TSV has no quoting convention, so
a `"` in a tab-separated text is an ordinary character (csv.QUOTE_NONE) and one line is one
record; CSV follows RFC 4180 quoting, where only a quoted field may run over several lines. The
training data and `trainer.predict` read through the same `iter_frames`, so both see the same
rows.
"""
import csv
import json
import os
import sys
from typing import Iterator, Optional, Sequence, TextIO

from trainer import storage
from trainer.errors import UserError

TEXT_COLUMNS = ("bodyText", "text", "sentence", "tweet", "review", "content")
# Sentence-pair files: (first text, second text), detected in this order.
PAIR_COLUMNS = (("sentence1", "sentence2"), ("question1", "question2"), ("premise", "hypothesis"),
                ("text_a", "text_b"))
LABEL_COLUMNS = ("sentiment", "label", "labels", "target", "class", "category")
FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
# Files whose texts are long documents exceed csv's default field limit of 128 KiB.
csv.field_size_limit(min(sys.maxsize, 2 ** 31 - 1))


def file_format(path: str, flag: str) -> str:
    ext = os.path.splitext(path.lower())[1]
    if ext not in FORMATS:
        raise UserError(f"{flag}: cannot tell the format of {path} from its extension {ext!r}; "
                        f"use one of {', '.join(sorted(FORMATS))}")
    return FORMATS[ext]


def _lines(path: str) -> Iterator[str]:
    """The file's lines, decoded one at a time (a file is never held whole); a UTF-8 BOM is
    dropped, and bytes that are not UTF-8 stop reading naming their line."""
    with storage.open_binary(path) as raw:
        for number, line in enumerate(raw, start=1):
            try:
                text = line.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise UserError(f"{path}: line {number} is not valid UTF-8 (byte "
                                f"{line[e.start]:#04x} at column {e.start + 1}); save the file "
                                f"as UTF-8") from None
            yield text


def _json_records(handle: TextIO, path: str) -> Iterator[dict]:
    """One JSON object per non-blank line."""
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}: line {number} is not valid JSON ({e.msg})") from None
        if not isinstance(record, dict):
            raise UserError(f"{path}: line {number} is not a JSON object")
        yield record


_HINTS = {"tsv": "a tab inside a text? TSV cannot quote it: replace tabs in texts, or use CSV",
          "csv": 'an unquoted comma or an unmatched " in a text? quote such texts: "a, b" and '
                 '"say ""hi"""'}


def _delimited_records(handle: TextIO, fmt: str, path: str):
    """(header, iterator of field lists), checking that each record has the header's width."""
    if fmt == "tsv":
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE, strict=True)
    else:
        reader = csv.reader(handle, strict=True)
    state = {"end": 0}

    def records():
        while True:
            start = state["end"] + 1
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise UserError(f"{path}: the record starting on line {start} is not valid "
                                f"{fmt.upper()} ({e}); {_HINTS[fmt]}") from None
            state["end"] = reader.line_num
            if not record:
                continue  # a blank line
            yield start, record

    rows = records()
    first = next(rows, None)
    if first is None:
        raise UserError(f"{path}: file is empty")
    header = first[1]
    if len(set(header)) < len(header):
        twice = next(name for name in header if header.count(name) > 1)
        raise UserError(f"{path}: line {first[0]}: column {twice!r} appears twice in the header")

    def checked():
        for start, record in rows:
            if len(header) > 1 and len(record) == 1 and not record[0].strip():
                continue  # a line of spaces; in a one-column file it is a row with an empty text
            if len(record) != len(header):
                lines = (f"line {start} holds" if reader.line_num == start
                         else f"lines {start}-{reader.line_num} hold")
                raise UserError(f"{path}: {lines} {len(record)} fields, the header "
                                f"{len(header)} ({_HINTS[fmt]})")
            yield record
    return header, checked()


def iter_frames(handle: TextIO, fmt: str, path: str, chunk_rows: Optional[int] = None):
    """DataFrames of strings (JSON Lines: of its values) with at most `chunk_rows` rows each
    (None: one frame), read from an open text file; `_row` numbers the data rows from 1."""
    import pandas as pd

    if fmt == "jsonl":
        header, records = None, _json_records(handle, path)
    else:
        header, records = _delimited_records(handle, fmt, path)
    batch, done = [], 0

    def frame():
        out = pd.DataFrame.from_records(batch, columns=header)
        if header is None:
            out = out.astype(object).where(out.notna(), None)
        out["_row"] = range(done + 1, done + len(batch) + 1)
        return out

    for record in records:
        batch.append(record)
        if chunk_rows and len(batch) == chunk_rows:
            yield frame()
            done, batch = done + len(batch), []
    if batch or not done:
        yield frame()


def file_frames(path: str, flag: str, chunk_rows: Optional[int] = None):
    """One file's rows as DataFrames of at most `chunk_rows` rows (None: one frame), read as
    a stream, with `_file` and `_row` columns for error messages."""
    fmt = file_format(path, flag)
    try:
        frames = iter_frames(_lines(path), fmt, path, chunk_rows)
        for index, frame in enumerate(frames):
            if index == 0 and frame.empty:
                raise UserError(f"{path}: file is empty" if fmt == "jsonl"
                                else f"{path}: file has a header but no data rows")
            frame["_file"] = path
            yield frame
    except UserError:
        raise
    except Exception as e:  # tf.errors.* from gfile that storage does not translate
        raise UserError(f"{flag}: cannot read {path}: {getattr(e, 'message', e)}") from None


def read_table(path: str, flag: str):
    """One file as a DataFrame of strings (labels are parsed later, with row numbers)."""
    return next(file_frames(path, flag))


def split_frames(spec: str, flag: str, chunk_rows: Optional[int] = None):
    """All files of one split as a stream of frames, checking that they share the first
    file's columns."""
    columns, first = None, None
    for path in storage.expand_paths(spec, flag):
        for frame in file_frames(path, flag, chunk_rows):
            if columns is None:
                columns, first = [c for c in frame.columns if not c.startswith("_")], path
            missing = [c for c in columns if c not in frame.columns]
            if missing:
                raise UserError(f"{flag}: {path} lacks columns {missing} that {first} has")
            yield frame


def read_files(spec: str, flag: str):
    """All files of one split as one frame, with `_file` and `_row` columns."""
    import pandas as pd

    return pd.concat(list(split_frames(spec, flag)), ignore_index=True)


def where(frame, index: int, column: str) -> str:
    return f"{frame['_file'].iloc[index]} row {frame['_row'].iloc[index]}, column {column!r}"


def pick_column(frame, requested: Optional[str], candidates: Sequence[str],
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


def pick_text_columns(frame, text_column: Optional[str], pair_column: Optional[str]):
    """(text column, pair column or None): the flags, else a known column pair, else one text
    column found as `pick_column` finds it."""
    columns = {str(c).lower(): c for c in frame.columns if not str(c).startswith("_")}
    if text_column is None and pair_column is None:
        for first, second in PAIR_COLUMNS:
            if first in columns and second in columns:
                return columns[first], columns[second]
    if pair_column is None:
        return pick_column(frame, text_column, TEXT_COLUMNS, "--text-column", "text"), None
    pair_column = pick_column(frame, pair_column, (), "--text-pair-column", "pair")
    firsts = tuple(first for first, _ in PAIR_COLUMNS)
    text = pick_column(frame, text_column, firsts + TEXT_COLUMNS, "--text-column", "text")
    if pair_column == text:
        raise UserError(f"--text-pair-column: {pair_column!r} is the text column itself")
    return text, pair_column
