"""`python -m trainer.predict`: add predicted labels and class probabilities (or scores) to a file's rows.

Streams the input in chunks (files larger than memory are fine). A chunk is tokenized by the
export's own `tokenize` function, sorted by token count and cut into batches that each hold one
length of the padding ladder (trainer.data.padding.padded_lengths), so a batch computes hardly
any padding; the next chunk is read and tokenized on a background thread meanwhile. Exports
older than `tokenize` are run through their signature, in batches of similar character counts.
The input is read by the trainer's own reader (trainer.reading), so a file yields the rows
training would see; output rows keep the input's order and columns, one per input row. The text
columns are the ones the model was trained on when the file holds them (trainer.serving.columns),
else detected as the trainer detects them. A row whose text is empty gets no prediction, only a
note: training refuses such rows, so the model never learned what they mean.

An ONNX copy (--runtime onnx) is loaded so that it reads like an export (serving/onnx/runtime.py:
its own `tokenize` and `predict_tokens`), so the same code runs it, also where TensorFlow is
not installed.
"""

import argparse
import contextlib
import csv
import gzip
import io
import json
import os
import tempfile
import time

from trainer import cli, helptext, progress, storage
from trainer import reading as data
from trainer.errors import UserError
from trainer.inference import loaded_model
from trainer.serving import columns as trained
from trainer.serving import protocol, variants

CHUNK_ROWS = 8192
NPY = ".npy"
NOTE_COLUMN = "note"


def build_arg_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m trainer.predict", description=__doc__.splitlines()[0], formatter_class=helptext.DefaultsShown
    )
    add_input_arguments(parser)
    parser.add_argument(
        "--output",
        required=True,
        help="Where to write: .csv, .tsv, .jsonl (JSON Lines) or .json (one JSON "
        "array), each plain or .gz (local or gs://); or, for an embedding model, .npy: its "
        "vectors as one float32 array, a row per input row (NaN for an empty text).",
    )
    add_copy_arguments(parser, "computes")
    parser.add_argument("--batch-size", type=int, default=128, help="Texts per model call.")
    add_run_arguments(parser)
    return parser


def add_input_arguments(parser, input_help: str = "") -> None:
    """The model and the file it reads, and how: trainer.predict's flags, which trainer.explain
    and trainer.evaluate share (they read their --input exactly as this does; `input_help`
    says what else --input may be)."""
    parser.add_argument("--model-dir", required=True, help="An exported model (JOB_DIR/model).")
    parser.add_argument(
        "--input",
        required=True,
        help="CSV, TSV, JSON Lines or JSON array file, plain or .gz (local or gs://)." + input_help,
    )
    parser.add_argument(
        "--delimiter",
        default=None,
        help="As the trainer's --delimiter: the field separator of a .csv --input "
        "(';' for a CSV saved by Excel in a European locale). Default: ','.",
    )
    parser.add_argument(
        "--text-column",
        default=None,
        help="Column holding the text; by default the model's own (the one it was "
        "trained on) if the file has it, else detected as the trainer does.",
    )
    parser.add_argument(
        "--text-pair-column",
        default=None,
        help="Column holding the second text, for a sentence-pair model; by "
        "default the model's own if the file has it, else detected as the "
        "trainer does (sentence1/sentence2, ...).",
    )


def add_copy_arguments(parser, does: str) -> None:
    """--runtime and --precision: which of the model dir's copies `does` (trainer.predict's,
    trainer.serve's, trainer.evaluate's)."""
    parser.add_argument("--runtime", default="auto", choices=variants.RUNTIMES, help=variants.RUNTIME_HELP)
    parser.add_argument(
        "--precision",
        default="auto",
        choices=variants.PRECISIONS,
        help=f"Which of the model dir's models {does}: {variants.AUTO_HELP}",
    )


def add_run_arguments(parser) -> None:
    """Progress lines and overwriting an existing --output (trainer.predict's, trainer.explain's)."""
    parser.add_argument(
        "--log-every-seconds", type=float, default=10.0, help="Seconds between progress lines (rows/s and ETA)."
    )
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing --output.")


def text_columns(chunk, args, pair_model: bool, model_columns: tuple = (None, None), compares: bool = False):
    """(text column, pair column or None) of the input, as the model needs them: a flag names
    its column; else the model's own column (`model_columns`, trained.model_columns) if the
    file holds it; else the trainer's detection. `compares`: a model of one text that compares
    two (Task.compares_pairs) takes a pair of columns when the file has one."""
    text_column, pair_column = (
        flag or (data.find_column(chunk, column) if column else None)
        for flag, column in zip((args.text_column, args.text_pair_column), model_columns)
    )
    if compares:
        return data.pick_text_columns(chunk, text_column, pair_column)
    if not pair_model:
        if args.text_pair_column:
            raise UserError("--text-pair-column: this model reads one text per row, not pairs")
        return data.pick_column(chunk, text_column, data.TEXT_COLUMNS, "--text-column", "text"), None
    text, pair = data.pick_text_columns(chunk, text_column, pair_column)
    if pair is None:
        raise UserError(
            f"{chunk['_file'].iloc[0]}: this model reads sentence pairs, and no pair "
            f"of columns ({', '.join('/'.join(p) for p in data.PAIR_COLUMNS)}) was "
            f"found; name the second text with --text-pair-column"
        )
    return text, pair


def check_input_columns(args, copy_dir: str = None):
    """The input's text columns, found as the chunks will find them (text_columns) for the
    model's signature read without loading it (serving/signature.py; an ONNX copy's, at
    `copy_dir`, from its onnx.json): a file without them is one line before the model loads,
    not after. Returns the signature."""
    frames = data.file_frames(args.input, "--input", CHUNK_ROWS, args.delimiter)
    try:
        first = next(frames)
    finally:
        frames.close()
    found = variants.signature_of(args.model_dir, copy_dir)
    text_columns(first, args, found.pair, trained.model_columns(args.model_dir), found.task().compares_pairs)
    return found


def add_predictions(chunk, model, texts, batch_size: int, pairs=None, features=None) -> int:
    """predicted_score; or predicted_labels (multi-label) or predicted_label, and a
    probability_<label> column per label; then `note`. A row with an empty text gets empty
    predictions and a note saying why. Returns the number of such rows."""
    added = _add_outputs(chunk, model, texts, batch_size, pairs, features)
    empty = loaded_model.empty_rows(texts, pairs)
    if empty.any():
        for column in added:
            chunk[column] = chunk[column].astype(object).where(~empty, None)
    chunk[NOTE_COLUMN] = [protocol.EMPTY_NOTE if e else "" for e in empty]
    return int(empty.sum())


def _add_outputs(chunk, model, texts, batch_size: int, pairs=None, features=None) -> list:
    """The model's columns of every row (its task's, Task.predicted_columns; a model comparing
    two texts, each text's and their comparison, Task.compared_columns); returns their names."""
    task = loaded_model.task_of(model)
    if task.compares_pairs and pairs is not None:
        outputs = (
            loaded_model.task_outputs(model, task, side, batch_size, None, f)
            for side, f in ((texts, features), (pairs, None))
        )
        columns = task.compared_columns(*outputs)
    else:
        columns = task.predicted_columns(loaded_model.task_outputs(model, task, texts, batch_size, pairs, features))
    for name, values in columns.items():
        chunk[name] = values
    return list(columns)


def write_frame(frame, handle, fmt: str, first: bool) -> None:
    """CSV quotes as needed; TSV is written as it is read, without quoting, so a text holding a
    tab or a line break (possible from CSV or JSON Lines input) cannot be written as TSV. A JSON
    array holds JSON Lines' rows, comma-separated (written_output writes its brackets)."""
    if fmt in ("json", "jsonl"):
        rows = _json_rows(frame)
        if fmt == "jsonl":
            handle.write("".join(row + "\n" for row in rows))
        elif rows:
            handle.write(("\n" if first else ",\n") + ",\n".join(rows))
        return
    frame = _json_cells(frame)
    if fmt == "csv":
        frame.to_csv(handle, index=False, header=first)
        return
    for column in frame.columns:
        values = frame[column].astype(str)
        bad = values.str.contains("[\t\r\n]", regex=True)
        if bad.any():
            raise UserError(
                f"--output: a value of column {column!r} holds a tab or a line break, which "
                f"TSV cannot hold (input row {bad.to_numpy().argmax() + 1} of this chunk); "
                f"write .csv or .jsonl instead"
            )
    frame.to_csv(handle, sep="\t", index=False, header=first, quoting=csv.QUOTE_NONE)


def _json_cells(frame):
    """The frame with each list cell (a tagger's entities and tags) as its JSON text: a CSV or
    TSV cell holds text."""
    nested = [
        c for c in frame.columns if frame[c].dtype == object and isinstance(next(iter(frame[c].dropna()), None), list)
    ]
    if not nested:
        return frame
    frame = frame.copy()
    for column in nested:
        frame[column] = frame[column].map(lambda v: json.dumps(v, ensure_ascii=False) if isinstance(v, list) else v)
    return frame


def _json_rows(frame) -> list:
    """Each row as one line of JSON. A missing value (an empty cell of the input, an empty
    text's prediction) is null: NaN is no JSON value."""
    records = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    return [json.dumps(record, ensure_ascii=False, default=str, allow_nan=False) for record in records]


def output_format(path: str) -> str:
    """--output's format from its extension, which may be followed by .gz as --input's may:
    the reader's formats (trainer.reading), except that .json is written as one JSON array,
    the file json.load reads (the reader takes an array or JSON Lines from .json); and .npy, an
    embedding model's vectors (serving/npy_output.py), uncompressed as numpy.load reads it."""
    if path.lower().endswith(NPY):
        return "npy"
    if path.lower().endswith(NPY + data.COMPRESSED):
        raise UserError(f"--output: {path}: a .npy output is written uncompressed (numpy.load reads it so)")
    fmt = data.file_format(path, "--output", compressed=True)
    return "json" if path.lower().removesuffix(data.COMPRESSED).endswith(".json") else fmt


def check_args(args) -> str:
    """Every flag and path checked before the model loads; returns the output format."""
    if args.batch_size < 1:
        raise UserError(f"--batch-size: must be at least 1, got {args.batch_size}")
    if not args.log_every_seconds > 0:
        raise UserError(f"--log-every-seconds: must be positive, got {args.log_every_seconds}")
    out_fmt = output_format(args.output)
    if storage.isdir(args.output):
        raise UserError(f"--output: {args.output} is a directory; name a file in it")
    if storage.exists(args.output) and not args.overwrite:
        raise UserError(f"--output: {args.output} exists; pass --overwrite to replace it")
    variants.require_model(args.model_dir)
    data.file_format(args.input, "--input", compressed=True)
    data.check_delimiter(args.delimiter)
    if not storage.exists(args.input):
        storage.require_bucket(args.input)
        raise UserError(f"--input: file not found: {args.input}")
    return out_fmt


@contextlib.contextmanager
def written_output(output: str, fmt: str):
    """A text handle whose contents become `output` only if the block ends without an error
    (nothing half-written is left): a temporary file next to a local --output, renamed into
    place, or a local one for gs://, copied up; gzip-compressed when --output ends with .gz.
    A JSON array's brackets are written here, around the rows write_frame writes. For .npy,
    the handle is npy_output.NpyRows over the binary file, its header written at the end."""
    raw = _scratch_file(output)
    try:
        with raw:
            if fmt == "npy":
                from trainer.serving import npy_output  # numpy: not for --help (tests/data/test_data.py)

                rows = npy_output.NpyRows(raw.file)
                yield rows
                rows.close()
            else:
                with _text_stream(raw.file, output) as handle:
                    handle.write("[" if fmt == "json" else "")
                    yield handle
                    handle.write("\n]\n" if fmt == "json" else "")
    except BaseException:
        os.unlink(raw.name)
        raise
    storage.publish_local_file(raw.name, output)


def _scratch_file(output: str):
    """The temporary file of written_output, opened before the model loads, so an --output
    that cannot be written (a read-only directory, a path under a file) is one line at once,
    not a traceback after the model has loaded."""
    scratch_dir = None if "://" in output else os.path.dirname(os.path.abspath(output))
    if scratch_dir:
        above = scratch_dir
        while not os.path.exists(above):
            above = os.path.dirname(above)
        if not os.path.isdir(above):
            raise UserError(f"--output: cannot write {output}: {above} is a file, not a directory")
    try:
        if scratch_dir:
            os.makedirs(scratch_dir, exist_ok=True)
        return tempfile.NamedTemporaryFile(
            "wb", dir=scratch_dir, prefix=".predict-", delete=False, suffix=os.path.splitext(output)[1]
        )
    except OSError as e:
        raise UserError(f"--output: cannot write {output}: {e.strerror} ({e.filename})") from None


def _text_stream(binary, output: str):
    """`binary` written as UTF-8 text, through gzip for a .gz --output (whose header names the
    file --output holds, as gzip's own tool names it: `gunzip -N` restores that name)."""
    if output.lower().endswith(data.COMPRESSED):
        binary = gzip.GzipFile(filename=os.path.basename(output), mode="wb", fileobj=binary)
    return io.TextIOWrapper(binary, encoding="utf-8", newline="")


def _read_ahead(items):
    """The items of an iterator, the next one computed on a background thread meanwhile
    (reading and tokenizing release the model's cores most of the time)."""
    from concurrent.futures import ThreadPoolExecutor

    end, items = object(), iter(items)
    with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as pool:
        pending = pool.submit(next, items, end)
        while (item := pending.result()) is not end:
            pending = pool.submit(next, items, end)
            yield item


def _chunks(model, args):
    """(frame of the input's columns, texts, pairs or None, features or None, its size in
    bytes, about, its rows at the model's limit) for each chunk of --input, read as a stream."""
    import pandas as pd

    strings = lambda values: ["" if pd.isna(t) else str(t) for t in values.tolist()]  # noqa: E731
    columns, compares = None, loaded_model.task_of(model).compares_pairs
    for frame in data.file_frames(args.input, "--input", CHUNK_ROWS, args.delimiter):
        if columns is None:
            pair_model, model_columns = loaded_model.is_pair_model(model), trained.model_columns(args.model_dir)
            columns = text_columns(frame, args, pair_model, model_columns, compares)
        frame = frame.drop(columns=["_file", "_row"])
        texts = strings(frame[columns[0]])
        pairs = strings(frame[columns[1]]) if columns[1] else None
        together = None if compares else pairs  # a comparing model's texts are tokenized each alone
        features = loaded_model.tokenize(model, texts, together) if loaded_model.tokenizes(model) else None
        size = sum(int(frame[c].astype(str).str.len().sum()) + len(frame) for c in frame.columns)
        yield frame, texts, pairs, features, size, at_limit(features)


def at_limit(features) -> int:
    """How many rows fill every position the export's features have: texts cut at
    --max-seq-length (or exactly that long), or with windows, texts that filled --max-windows
    windows (whose end past them is not read, or which end exactly there). 0 without features
    (an export from before `tokenize`)."""
    if features is None:
        return 0
    mask = features["input_mask"]
    return int((mask.sum(axis=1) == mask.shape[1]).sum())


def limit_note(model, count: int, rows: int) -> str:
    """The line saying what became of the rows at the model's limit (at_limit)."""
    flags = long_texts_of(model)
    if flags.mode == "windows":
        return (
            f"{count} of {rows} texts filled --max-windows {flags.max_windows} windows: an end "
            f"past them was not read (--long-texts windows)"
        )
    kept = "first and last" if flags.mode == "head-tail" else "first"
    return (
        f"{count} of {rows} texts reached the model's --max-seq-length: a longer text was cut to "
        f"its {kept} tokens (--long-texts {flags.mode})"
    )


def long_texts_of(model):
    """A loaded model's --long-texts and window flags: an ONNX copy's (its packing.json), else
    its float32 export's variables (an int8 model's: its float32 export's)."""
    if hasattr(model, "saved_long_texts"):
        return model.saved_long_texts
    from trainer.serving.export import saved_long_texts

    return saved_long_texts(getattr(model, "float32", model))


def predict_file(model, args, out_fmt: str, handle) -> int:
    """Streams --input through the model into `handle`, in input order; returns the rows
    written. The next chunk is read and tokenized while the model runs on this one."""
    rows, empty, full, read = 0, 0, 0, 0
    task = loaded_model.task_of(model)
    if out_fmt == "npy" and not task.array_columns:
        raise UserError(
            f"--output: {args.output}: a .npy output holds vectors, and this model (--task {task.name}) "
            "answers with predictions of another kind; write .csv, .tsv, .jsonl or .json"
        )
    total = max(1, storage.identity(args.input)[0])
    meter = progress.Progress("predicted", args.log_every_seconds)
    for frame, texts, pairs, features, size, limit in _read_ahead(_chunks(model, args)):
        if rows:  # the previous chunk's line; the last one's, at 100%, follows the loop
            meter.update(rows, fraction=min(read / total, 0.99))
        empty += add_predictions(frame, model, texts, args.batch_size, pairs, features)
        if out_fmt == "npy":
            handle.append([frame[column].tolist() for column in task.array_columns if column in frame])
        else:
            write_frame(frame, handle, out_fmt, first=rows == 0)
        rows, read, full = rows + len(frame), read + size, full + limit
    meter.update(rows, fraction=1.0)
    seconds = meter.seconds()
    print(f"predicted {rows} rows in {progress.clock(seconds)} ({rows / max(seconds, 1e-9):,.1f} rows/s)", flush=True)
    if empty:
        print(
            f"{empty} of {rows} rows have an empty text: no prediction, and the {NOTE_COLUMN} column says so",
            flush=True,
        )
    if full:
        print(limit_note(model, full, rows), flush=True)
    return rows


def _loaded_checking_columns(args, precision: str, path: str):
    """The model `precision` loaded, --input's columns checked first. An ONNX copy loads on a
    thread meanwhile: reading the input's first rows (importing pandas, most of it) and loading
    the copy take about 0.22 s each, and side by side 0.34 s (a 2-core Xeon, 2026-12-04: a
    one-row command 0.64 s against 0.75). A TensorFlow model loads after the check: its import
    filters stderr (trainer._QuietStart), where the check's error line goes."""
    if variants.runtime_of(precision) != "onnx":
        check_input_columns(args, None)
        return variants.load(args.model_dir, precision)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="load") as pool:
        loading = pool.submit(variants.load, args.model_dir, precision)
        check_input_columns(args, path)
        return loading.result()


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    cli.setup_logging()
    out_fmt = check_args(args)
    with written_output(args.output, out_fmt) as handle:
        started = time.monotonic()
        precision, path = variants.resolve(args.model_dir, args.precision, runtime=args.runtime)
        model = _loaded_checking_columns(args, precision, path)
        loaded_model.warm_up(model)
        print(f"loaded the {precision} model ({path}) in {progress.clock(time.monotonic() - started)}", flush=True)
        rows = predict_file(model, args, out_fmt, handle)
    print(f"wrote {rows} rows with predictions to {args.output}")
    return 0
