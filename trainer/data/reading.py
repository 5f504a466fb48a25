"""Reading data files (CSV, TSV, JSON Lines; local or gs://) into frames of strings.

Everything a user can get wrong in a file is caught here, before TensorFlow builds a graph, with
the file, row and column in the message. Rows are numbered from 1 = the first data row (the
header is not counted), the way spreadsheet users and `pandas.read_csv` see them.
"""
import io as _io
import json
import os
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from trainer import storage
from trainer.errors import UserError

TEXT_COLUMNS = ("bodyText", "text", "sentence", "tweet", "review", "content")
LABEL_COLUMNS = ("sentiment", "label", "labels", "target", "class", "category")
FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}

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


def where(frame: pd.DataFrame, index: int, column: str) -> str:
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


