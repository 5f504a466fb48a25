"""Reading data files (CSV, TSV, JSON Lines or a JSON array; plain or .gz; local or gs://) into
frames of strings.

Everything a user can get wrong in a file is caught here, before TensorFlow builds a graph, with
the file, line and column in the message. Lines are numbered as an editor shows them: the header
is line 1, and a record is named by the line it starts on (`_row` holds it), so "line 7" is where
the cursor goes. Files are read as streams, one line at a time, also when gzip-compressed; only a
JSON array, which has no line structure, is read whole.

Every line is accounted for: it is blank, the header, or part of exactly one record with the
header's number of fields, else reading stops naming the line. TSV has no quoting convention, so
a `"` in a tab-separated text is an ordinary character (csv.QUOTE_NONE) and one line is one
record; CSV follows RFC 4180 quoting, where only a quoted field may run over several lines. The
training data and `trainer.predict` read through the same `file_frames`, so both see the same
rows.

Column names are matched by one rule in every file and for every flag (`name_key`): surrounding
spaces, case and Unicode normalization do not count, so a header ` Text ` in one file and `text`
in another name the same column.
"""

import csv
import gzip
import itertools
import json
import os
import re
import sys
import unicodedata
import zlib
from collections.abc import Iterator, Sequence

from trainer import storage
from trainer.errors import UserError

TEXT_COLUMNS = ("bodyText", "text", "sentence", "tweet", "review", "content")
# Sentence-pair files: (first text, second text), detected in this order.
PAIR_COLUMNS = (
    ("sentence1", "sentence2"),
    ("question1", "question2"),
    ("premise", "hypothesis"),
    ("text_a", "text_b"),
    ("anchor", "positive"),
)
# A third text of a pair without a score, its first text's hard negative (sentence-transformers'
# triplets: anchor, positive, negative), for --task embedding's in-batch negatives.
NEGATIVE_COLUMNS = ("negative", "hard_negative")
LABEL_COLUMNS = ("sentiment", "label", "labels", "target", "class", "category")
FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
# Files of tagged sentences (CoNLL: a token and its tag per line), which token classification
# reads (tasks/tagging/files.py), not this reader of tables: its messages name them.
CONLL_SUFFIXES = (".conll", ".iob")
COMPRESSED = ".gz"
# Files whose texts are long documents exceed csv's default field limit of 128 KiB.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def file_format(path: str, flag: str, compressed: bool = False) -> str:
    """'csv', 'tsv' or 'jsonl' from the extension; with `compressed` (files that are read), a
    `.gz` after it is allowed too."""
    name = path.lower()
    if compressed and name.endswith(COMPRESSED):
        name = name[: -len(COMPRESSED)]
    ext = os.path.splitext(name)[1]
    if ext not in FORMATS:
        gz = f", each optionally followed by {COMPRESSED}" if compressed else ""
        known = f"use one of {', '.join(sorted(FORMATS))}{gz}"
        if ext in CONLL_SUFFIXES:
            raise UserError(
                f"{flag}: {path} is a CoNLL file of tagged sentences by its extension, "
                f"which --task token-classification (or auto) trains on; a table of "
                f"texts is read here: {known}"
            )
        raise UserError(f"{flag}: cannot tell the format of {path} from its extension {ext!r}; {known}")
    return FORMATS[ext]


def check_delimiter(delimiter: str | None) -> None:
    """--delimiter is one character that cannot be part of a field's quoting or a line break."""
    if delimiter is not None and (len(delimiter) != 1 or delimiter in '"\r\n'):
        raise UserError(f"--delimiter: must be one character other than a quote or a line break, got {delimiter!r}")


_UTF16 = (b"\xff\xfe", b"\xfe\xff")


def _decoded(stream, path: str) -> Iterator[str]:
    """The lines of a byte stream as text; a UTF-8 BOM is dropped. UTF-16 (a BOM, or the NUL
    bytes its ASCII characters carry) and other bytes that are not UTF-8 stop reading naming the
    line."""
    for number, line in enumerate(stream, start=1):
        if (number == 1 and line.startswith(_UTF16)) or b"\x00" in line:
            raise UserError(
                f"{path} line {number} looks like UTF-16 (it holds NUL bytes or "
                f"starts with a UTF-16 byte order mark); save the file as UTF-8"
            )
        try:
            text = line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as e:
            raise UserError(
                f"{path} line {number} is not valid UTF-8 (byte "
                f"{line[e.start]:#04x} at column {e.start + 1}); save the file "
                f"as UTF-8"
            ) from None
        yield text


def lines(path: str) -> Iterator[str]:
    """The file's lines, decoded one at a time (a file is never held whole); a `.gz` file is
    decompressed as a stream."""
    with storage.open_binary(path) as raw:
        if not path.lower().endswith(COMPRESSED):
            yield from _decoded(raw, path)
            return
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield from _decoded(unzipped, path)
        except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
            raise UserError(f"{path}: cannot decompress it as gzip ({e}); is it a complete .gz file?") from None


def json_records(lines: Iterator[str], path: str):
    """(line, object) per non-blank line of JSON Lines; or, when the first non-blank line opens
    a JSON array, per element of the array."""
    lines = iter(lines)
    first, opening = next(((n, line) for n, line in enumerate(lines, start=1) if line.strip()), (0, None))
    if opening is None:
        return
    if opening.lstrip().startswith("["):
        yield from _json_array(opening + "".join(lines), first, path)
        return
    for number, line in enumerate(itertools.chain([opening], lines), start=first):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(
                f"{path} line {number} is not valid JSON ({e.msg}); JSON Lines hold "
                f"one object per line, a JSON array starts with ["
            ) from None
        if not isinstance(record, dict):
            raise UserError(f"{path} line {number} is not a JSON object")
        yield number, record


_SPACE = re.compile(r"[ \t\r\n]*")


def _json_array(text: str, first_line: int, path: str):
    """(line, object) per element of a JSON array held in `text`, which starts on `first_line`."""
    decoder, state = json.JSONDecoder(), {"line": first_line, "at": 0}

    def line_of(position):
        state["line"] += text.count("\n", state["at"], position)
        state["at"] = position
        return state["line"]

    def fail(position, what):
        raise UserError(
            f"{path} line {line_of(position)} is not valid JSON ({what}); the file holds a JSON array of objects"
        )

    position = _SPACE.match(text, text.index("[") + 1).end()
    if text.startswith("]", position):
        return
    for element in itertools.count(1):
        try:
            record, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as e:
            fail(e.pos, e.msg)
        if not isinstance(record, dict):
            raise UserError(
                f"{path} line {line_of(position)}: element {element} of the JSON array is not a JSON object"
            )
        yield line_of(position), record
        position = _SPACE.match(text, end).end()
        if text.startswith(",", position):
            position = _SPACE.match(text, position + 1).end()
        elif text.startswith("]", position):
            if _SPACE.match(text, position + 1).end() != len(text):
                fail(position + 1, "extra data after the array")
            return
        else:
            fail(position, "expecting ',' or ']' between elements")


_HINTS = {
    "tsv": "a tab inside a text? TSV cannot quote it: replace tabs in texts, or use CSV",
    "csv": 'an unquoted comma or an unmatched " in a text? quote such texts: "a, b" and "say ""hi"""',
}
# Separators a one-field header may really be split by, by name.
_SEPARATORS = {";": "semicolons", "\t": "tabs", ",": "commas", "|": "vertical bars"}


def _check_separator(header: list, line: int, fmt: str, separator: str, path: str) -> None:
    """A header read as one field that holds another common separator is a file split by that
    one (a European Excel CSV uses ';'): say so, rather than a row-width error further down."""
    if len(header) != 1:
        return
    for other, name in _SEPARATORS.items():
        if other == separator or other not in header[0]:
            continue
        if other in "\t,":
            advice = "name the file .tsv" if other == "\t" else "name the file .csv without --delimiter"
        else:  # --delimiter is for .csv files
            advice = ("name the file .csv and " if fmt == "tsv" else "") + f"pass --delimiter '{other}'"
        if other == ";":
            advice = f"a CSV saved by Excel in a European locale? {advice}"
        raise UserError(
            f"{path} line {line}: the header {header[0]!r} is separated by "
            f"{name}, not {'tabs' if fmt == 'tsv' else repr(separator)}: {advice}"
        )


def _delimited_records(lines: Iterator[str], fmt: str, path: str, delimiter: str | None):
    """(header, iterator of (line, field list)), checking that each record has the header's
    width. `delimiter`: the separator of a CSV file, None for ',' (and a check of the header)."""
    if fmt == "tsv":
        reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE, strict=True)
    else:
        reader = csv.reader(lines, delimiter=delimiter or ",", strict=True)
    state = {"end": 0}

    def records():
        while True:
            start = state["end"] + 1
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise UserError(
                    f"{path}: the record starting on line {start} is not valid {fmt.upper()} ({e}); {_HINTS[fmt]}"
                ) from None
            state["end"] = reader.line_num
            if not record:
                continue  # a blank line
            yield start, record

    rows = records()
    first = next(rows, None)
    if first is None:
        raise UserError(f"{path}: file is empty")
    header = first[1]
    _check_separator(header, first[0], fmt, "\t" if fmt == "tsv" else delimiter or ",", path)
    check_header(header, f"{path} line {first[0]}")

    def checked():
        for start, record in rows:
            if len(header) > 1 and len(record) == 1 and not record[0].strip():
                continue  # a line of spaces; in a one-column file it is a row with an empty text
            if len(record) != len(header):
                lines_ = f"line {start} holds" if reader.line_num == start else f"lines {start}-{reader.line_num} hold"
                raise UserError(f"{path} {lines_} {len(record)} fields, the header {len(header)} ({_HINTS[fmt]})")
            yield start, record

    return header, checked()


def iter_frames(lines: Iterator[str], fmt: str, path: str, chunk_rows: int | None = None, delimiter: str | None = None):
    """DataFrames of strings (JSON: of its values) with at most `chunk_rows` rows each (None:
    one frame), read from a file's lines; `_row` is the line each row starts on."""
    import pandas as pd

    if fmt == "jsonl":
        header, records = None, json_records(lines, path)
    else:
        header, records = _delimited_records(lines, fmt, path, delimiter)
    batch, numbers, done = [], [], 0

    def frame():
        out = pd.DataFrame.from_records(batch, columns=header)
        if header is None:
            out = out.astype(object).where(out.notna(), None)
            check_header(list(out.columns), f"{path} line {numbers[0]}" if numbers else path)
        out["_row"] = numbers
        return out

    for number, record in records:
        batch.append(record)
        numbers.append(number)
        if chunk_rows and len(batch) == chunk_rows:
            yield frame()
            done, batch, numbers = done + len(batch), [], []
    if batch or not done:
        yield frame()


def file_frames(path: str, flag: str, chunk_rows: int | None = None, delimiter: str | None = None):
    """One file's rows as DataFrames of at most `chunk_rows` rows (None: one frame), read as
    a stream, with `_file` and `_row` columns for error messages."""
    fmt = file_format(path, flag, compressed=True)
    try:
        frames = iter_frames(lines(path), fmt, path, chunk_rows, delimiter)
        for index, frame in enumerate(frames):
            if index == 0 and frame.empty:
                raise UserError(
                    f"{path}: file is empty" if fmt == "jsonl" else f"{path}: file has a header but no data rows"
                )
            frame["_file"] = path
            yield frame
    except UserError:
        raise
    except Exception as e:  # tf.errors.* from gfile that storage does not translate
        raise UserError(f"{flag}: cannot read {path}: {getattr(e, 'message', e)}") from None


def read_table(path: str, flag: str):
    """One file as a DataFrame of strings (labels are parsed later, with line numbers)."""
    return next(file_frames(path, flag))


def split_frames(spec: str, flag: str, chunk_rows: int | None = None, delimiter: str | None = None):
    """All files of one split as a stream of frames, checking that they share the first
    file's columns (matched by `name_key`, and named as in the first file)."""
    columns, first = None, None
    for path in storage.expand_paths(spec, flag):
        for frame in file_frames(path, flag, chunk_rows, delimiter):
            if columns is None:
                columns, first = [c for c in frame.columns if not c.startswith("_")], path
            frame = conform(frame, columns)
            missing = [c for c in columns if c not in frame.columns]
            if missing:
                raise UserError(f"{flag}: {path} lacks columns {missing} that {first} has")
            yield frame


def read_files(spec: str, flag: str, delimiter: str | None = None):
    """All files of one split as one frame, with `_file` and `_row` columns."""
    import pandas as pd

    return pd.concat(list(split_frames(spec, flag, delimiter=delimiter)), ignore_index=True)


def where(frame, index: int, column: str) -> str:
    return f"{frame['_file'].iloc[index]} line {frame['_row'].iloc[index]}, column {column!r}"


def name_key(name) -> str:
    """The one rule names are compared by: column names, in every file and for every flag
    (` Text `, `text` and `TEXT` are one column), and labels that must not be two classes (the
    NFC and NFD spellings of `café`, `Positive` and `positive`)."""
    return unicodedata.normalize("NFKC", str(name)).strip().casefold()


def check_header(names: list, where_: str) -> None:
    """Two header cells that `name_key` cannot tell apart would make a column ambiguous."""
    seen = {}
    for name in names:
        key = name_key(name)
        if key not in seen:
            seen[key] = name
            continue
        other = seen[key]
        if other == name:
            raise UserError(f"{where_}: column {name!r} appears twice in the header")
        raise UserError(
            f"{where_}: columns {other!r} and {name!r} are one column to this trainer "
            f"(names are matched ignoring case and surrounding spaces); rename one"
        )


def find_column(frame, name: str) -> str | None:
    """The frame's column that `name` means by `name_key`, or None."""
    if name in frame.columns:
        return name
    key = name_key(name)
    return next((c for c in frame.columns if not str(c).startswith("_") and name_key(c) == key), None)


def conform(frame, names: Sequence[str]):
    """The frame with its columns renamed to `names` where they match by `name_key`, so that
    every file of a run is read by the training file's column names."""
    renames = {}
    for name in names:
        found = find_column(frame, name)
        if found is not None and found != name:
            renames[found] = name
    return frame.rename(columns=renames) if renames else frame


def _columns(frame) -> list:
    return [c for c in frame.columns if not str(c).startswith("_")]


def pick_column(frame, requested: str | None, candidates: Sequence[str], flag: str, what: str) -> str:
    """The frame's column named by the flag, else the first of `candidates` it has (both matched
    by `name_key`)."""
    source = frame["_file"].iloc[0]
    if requested is not None:
        found = find_column(frame, requested)
        if found is None:
            raise UserError(f"{flag}: column {requested!r} is not in {source}; its columns are {_columns(frame)}")
        return found
    for name in candidates:
        found = find_column(frame, name)
        if found is not None:
            return found
    raise UserError(
        f"{source}: no {what} column found (looked for {', '.join(candidates)}); its "
        f"columns are {_columns(frame)}. Name one with {flag}."
    )


def pick_text_columns(frame, text_column: str | None, pair_column: str | None):
    """(text column, pair column or None): the flags, else a known column pair, else one text
    column found as `pick_column` finds it."""
    if text_column is None and pair_column is None:
        for first, second in PAIR_COLUMNS:
            found = find_column(frame, first), find_column(frame, second)
            if None not in found:
                return found
    if pair_column is None:
        return pick_column(frame, text_column, TEXT_COLUMNS, "--text-column", "text"), None
    pair_column = pick_column(frame, pair_column, (), "--text-pair-column", "pair")
    firsts = tuple(first for first, _ in PAIR_COLUMNS)
    text = pick_column(frame, text_column, firsts + TEXT_COLUMNS, "--text-column", "text")
    if pair_column == text:
        raise UserError(f"--text-pair-column: {pair_column!r} is the text column itself")
    return text, pair_column
