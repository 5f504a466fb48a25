"""`python -m trainer.predict`: add predicted labels and class probabilities (or scores) to a file's rows.

Streams the input in chunks (files larger than memory are fine) and, within a chunk, sorts
texts by length before batching so each batch is padded only as far as its longest text.
The input is read by the trainer's own reader (trainer.data.reading), so a file yields the rows
training would see; output rows keep the input's order and columns, one per input row.
"""
import argparse
import contextlib
import csv
import io
import json
import os
import tempfile

import trainer
from trainer import cli, helptext, progress, storage
from trainer.data import reading as data
from trainer.errors import UserError

CHUNK_ROWS = 8192


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainer.predict", description=__doc__.splitlines()[0],
                                     formatter_class=helptext.DefaultsShown)
    parser.add_argument("--model-dir", required=True, help="An exported model (JOB_DIR/model).")
    parser.add_argument("--input", required=True, help="CSV, TSV or JSON Lines file (local or gs://).")
    parser.add_argument("--output", required=True, help="Where to write (format from the extension).")
    parser.add_argument("--text-column", default=None,
                        help="Column holding the text; by default detected as the trainer does.")
    parser.add_argument("--text-pair-column", default=None,
                        help="Column holding the second text, for a sentence-pair model; by "
                             "default detected as the trainer does (sentence1/sentence2, ...).")
    parser.add_argument("--batch-size", type=int, default=128, help="Texts per model call.")
    parser.add_argument("--log-every-seconds", type=float, default=10.0,
                        help="Seconds between progress lines (rows/s and ETA).")
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing --output.")
    return parser


@contextlib.contextmanager
def _local_copy(path: str):
    """The reader streams local files only (GFile is not a full file object): gs:// is copied to
    local disk first, which holds far more than memory."""
    if "://" not in path:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="predict-input-") as scratch:
        local = os.path.join(scratch, os.path.basename(path))
        storage.copy(path, local)
        yield local


def text_columns(chunk, args, pair_model: bool):
    """(text column, pair column or None) of the input, as the model needs them."""
    if not pair_model:
        if args.text_pair_column:
            raise UserError("--text-pair-column: this model reads one text per row, not pairs")
        return data.pick_column(chunk, args.text_column, data.TEXT_COLUMNS, "--text-column", "text"), None
    text, pair = data.pick_text_columns(chunk, args.text_column, args.text_pair_column)
    if pair is None:
        raise UserError(f"{chunk['_file'].iloc[0]}: this model reads sentence pairs, and no pair "
                        f"of columns ({', '.join('/'.join(p) for p in data.PAIR_COLUMNS)}) was "
                        f"found; name the second text with --text-pair-column")
    return text, pair


def read_chunks(path: str, columns_of):
    """(frame, (text column, pair column or None), share of the file read) chunks of a local or
    gs:// file; `columns_of(first chunk)` picks the columns."""
    fmt = data.file_format(path, "--input")
    with _local_copy(path) as local_path, open(local_path, "rb") as raw:
        size = max(1, os.path.getsize(local_path))
        handle = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline="")
        column = None
        try:
            for chunk in data.iter_frames(handle, fmt, path, CHUNK_ROWS):
                if chunk.empty:
                    raise UserError(f"{path}: file has no data rows")
                if column is None:
                    column = columns_of(chunk.assign(_file=path))
                yield chunk.drop(columns="_row"), column, raw.tell() / size
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: not valid UTF-8 ({e.reason} near byte {raw.tell()}); "
                            f"save the file as UTF-8") from None


def _sorted_batches(texts, batch_size: int, pairs=None):
    """(row indices, serving inputs) batches of similar length, covering every row once."""
    import numpy as np

    lengths = [len(t) for t in texts] if pairs is None else [len(a) + len(b) for a, b in zip(texts, pairs)]
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(texts), batch_size):
        rows = order[start:start + batch_size]
        inputs = {"text": np.asarray([texts[i] for i in rows], dtype=object)}
        if pairs is not None:
            inputs["text_pair"] = np.asarray([pairs[i] for i in rows], dtype=object)
        yield rows, inputs


def predict_texts(serve, texts, batch_size: int, pairs=None):
    """(probabilities [N, C], label names [C]) in input order; batches of similar length."""
    import numpy as np

    probabilities, names = None, None
    for rows, inputs in _sorted_batches(texts, batch_size, pairs):
        out = serve(**inputs)
        if probabilities is None:
            names = [n.decode("utf-8") for n in out["label_names"].numpy()[0]]
            probabilities = np.zeros((len(texts), len(names)), np.float32)
        probabilities[rows] = out["probabilities"].numpy()
    return probabilities, names


def predict_scores(serve, texts, batch_size: int, pairs=None):
    """A regression model's scores [N], in input order."""
    import numpy as np

    scores = np.zeros(len(texts), np.float32)
    for rows, inputs in _sorted_batches(texts, batch_size, pairs):
        scores[rows] = serve(**inputs)["score"].numpy()
    return scores


def predict_label_sets(serve, texts, batch_size: int, pairs=None):
    """A multi-label model's (probabilities [N, L], label names, chosen labels joined [N],
    chosen labels 0/1 [N, L])."""
    import numpy as np

    probabilities, names, joined, chosen = None, None, [""] * len(texts), None
    for rows, inputs in _sorted_batches(texts, batch_size, pairs):
        out = serve(**inputs)
        if probabilities is None:
            names = [n.decode("utf-8") for n in out["label_names"].numpy()[0]]
            probabilities = np.zeros((len(texts), len(names)), np.float32)
            chosen = np.zeros((len(texts), len(names)), np.int32)
        probabilities[rows] = out["probabilities"].numpy()
        chosen[rows] = out["predicted"].numpy()
        for row, labels in zip(rows, out["labels"].numpy()):
            joined[row] = labels.decode("utf-8")
    return probabilities, names, joined, chosen


def is_multilabel(serve) -> bool:
    """A multi-label export returns the chosen `labels` of each text."""
    return "labels" in serve.structured_outputs


def is_pair_model(serve) -> bool:
    """A sentence-pair export takes `text_pair` besides `text`."""
    return "text_pair" in serve.structured_input_signature[1]


def is_regression(serve) -> bool:
    """A regression export returns `score` instead of probabilities."""
    return "score" in serve.structured_outputs


def predict_instances(serve, instances, batch_size: int):
    """The server's batch function: (one response prediction per instance, None); instances are
    texts, or (text, pair) tuples for a pair model."""
    from trainer.serving import protocol

    texts, pairs = instances, None
    if is_pair_model(serve):
        texts, pairs = [a for a, _ in instances], [b for _, b in instances]
    if is_regression(serve):
        return protocol.score_predictions(predict_scores(serve, texts, batch_size, pairs)), None
    if is_multilabel(serve):
        probabilities, names, _, chosen = predict_label_sets(serve, texts, batch_size, pairs)
        return protocol.label_set_predictions(probabilities, names, chosen), None
    return protocol.predictions(*predict_texts(serve, texts, batch_size, pairs)), None


def add_predictions(chunk, serve, texts, batch_size: int, pairs=None) -> None:
    """predicted_score; or predicted_labels (multi-label) or predicted_label, and a
    probability_<label> column per label."""
    if is_regression(serve):
        chunk["predicted_score"] = predict_scores(serve, texts, batch_size, pairs)
        return
    if is_multilabel(serve):
        probabilities, names, chunk["predicted_labels"], _ = predict_label_sets(
            serve, texts, batch_size, pairs)
        for i, name in enumerate(names):
            chunk[f"probability_{name}"] = probabilities[:, i]
        return
    probabilities, names = predict_texts(serve, texts, batch_size, pairs)
    chunk["predicted_label"] = [names[i] for i in probabilities.argmax(axis=1)]
    for i, name in enumerate(names):
        chunk[f"probability_{name}"] = probabilities[:, i]


def write_frame(frame, handle, fmt: str, first: bool) -> None:
    """CSV quotes as needed; TSV is written as it is read, without quoting, so a text holding a
    tab or a line break (possible from CSV or JSON Lines input) cannot be written as TSV."""
    if fmt == "jsonl":
        for record in frame.to_dict(orient="records"):
            handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        return
    if fmt == "csv":
        frame.to_csv(handle, index=False, header=first)
        return
    for column in frame.columns:
        values = frame[column].astype(str)
        bad = values.str.contains("[\t\r\n]", regex=True)
        if bad.any():
            raise UserError(f"--output: a value of column {column!r} holds a tab or a line break, which "
                            f"TSV cannot hold (input row {bad.to_numpy().argmax() + 1} of this chunk); "
                            f"write .csv or .jsonl instead")
    frame.to_csv(handle, sep="\t", index=False, header=first, quoting=csv.QUOTE_NONE)


def check_args(args) -> str:
    """Every flag and path checked before the model loads; returns the output format."""
    if args.batch_size < 1:
        raise UserError(f"--batch-size: must be at least 1, got {args.batch_size}")
    if not args.log_every_seconds > 0:
        raise UserError(f"--log-every-seconds: must be positive, got {args.log_every_seconds}")
    out_fmt = data.file_format(args.output, "--output")
    if storage.exists(args.output) and not args.overwrite:
        raise UserError(f"--output: {args.output} exists; pass --overwrite to replace it")
    storage.require_bucket(args.model_dir)
    if not storage.exists(storage.join(args.model_dir, "saved_model.pb")):
        raise UserError(f"--model-dir: no exported model in {args.model_dir} (expected "
                        f"saved_model.pb; point it at JOB_DIR/model)")
    data.file_format(args.input, "--input")
    if not storage.exists(args.input):
        storage.require_bucket(args.input)
        raise UserError(f"--input: file not found: {args.input}")
    return out_fmt


def predict_file(serve, args, out_fmt: str, handle) -> int:
    """Streams --input through the model into `handle`; returns the rows written."""
    import pandas as pd

    rows = 0
    meter = progress.Progress("predicted", args.log_every_seconds)
    pair_model = is_pair_model(serve)
    strings = lambda values: ["" if pd.isna(t) else str(t) for t in values.tolist()]  # noqa: E731
    for chunk, (column, pair_column), read in read_chunks(
            args.input, lambda first: text_columns(first, args, pair_model)):
        texts = strings(chunk[column])
        pairs = strings(chunk[pair_column]) if pair_column else None
        chunk = chunk.copy()
        add_predictions(chunk, serve, texts, args.batch_size, pairs)
        write_frame(chunk, handle, out_fmt, first=rows == 0)
        rows += len(chunk)
        meter.update(rows, fraction=read)
    seconds = meter.seconds()
    print(f"predicted {rows} rows in {progress.clock(seconds)} ({rows / max(seconds, 1e-9):.0f} rows/s)",
          flush=True)
    return rows


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    cli.setup_logging()
    trainer.import_tensorflow()
    from trainer.serving import export

    out_fmt = check_args(args)
    serve = export.load(args.model_dir)
    local = "://" not in args.output
    # Written next to the output (or locally, for gs://) and moved into place at the end.
    scratch_dir = os.path.dirname(os.path.abspath(args.output)) if local else None
    if scratch_dir:
        os.makedirs(scratch_dir, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=scratch_dir, prefix=".predict-", delete=False,
                                     suffix=os.path.splitext(args.output)[1],
                                     encoding="utf-8", newline="") as tmp:
        try:
            rows = predict_file(serve, args, out_fmt, tmp)
        except BaseException:
            tmp.close()
            os.unlink(tmp.name)
            raise
    if local:
        os.replace(tmp.name, args.output)
    else:
        storage.copy(tmp.name, args.output)
        os.unlink(tmp.name)
    print(f"wrote {rows} rows with predictions to {args.output}")
    return 0
