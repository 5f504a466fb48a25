"""`python -m trainer.explain`: which words made an exported model say what it said, per row of a file.

Reads --input as trainer.predict reads it (same columns, same errors) and writes, per text and
explained output (the predicted class, or --target; each predicted label of a multi-label
model; a regression model's score), its probability, the log-odds the attributions explain
(a score: the score itself) and the baseline's, and the --top-k words of largest attribution,
as a CSV (top_words as JSON), JSON Lines or one JSON array by --output's extension (each plain
or .gz, written as trainer.predict writes), plus an HTML page colouring each text's words beside
it (OUTPUT with .html).
Attributions are integrated gradients on the word embeddings (trainer.explaining), computed
by the float32 model of --model-dir, the one trainer.predict loads with --precision float32.
"""

import json
import os
import sys
import time

import trainer
import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli, helptext, installed, progress, storage
from trainer import config as config_lib
from trainer import reading as data
from trainer.errors import UserError
from trainer.inference import loaded_model
from trainer.serving import columns as trained
from trainer.serving import predict_file, protocol

HTML_ROWS = 1000  # explanations on the HTML page; the output file holds every one
OUTPUT_FORMATS = ("csv", "jsonl", "json")


def build_arg_parser():
    parser = cli.ArgumentParser(
        prog="python -m trainer.explain", description=__doc__.splitlines()[0], formatter_class=helptext.DefaultsShown
    )
    predict_file.add_input_arguments(parser)
    parser.add_argument(
        "--output",
        default=None,
        help="Where to write: .csv, .jsonl or .json (one JSON array), each plain "
        "or .gz. Default: beside --input, its name with -explained.jsonl. "
        "The HTML page goes beside it (.html).",
    )
    parser.add_argument("--top-k", type=int, default=5, help="Words listed per explanation.")
    parser.add_argument(
        "--ig-steps",
        type=int,
        default=config_lib.OutputConfig().ig_steps,
        help="Integrated-gradients steps (the trapezoid rule's intervals). A text "
        "whose attributions miss the output's change by more than 5%% is "
        "integrated again with twice the steps, up to 8 times these.",
    )
    parser.add_argument(
        "--target",
        default=None,
        help="Explain this label's probability for every row, instead of the "
        "predicted one (classification and multi-label).",
    )
    parser.add_argument(
        "--batch-size", type=int, default=64, help="Texts per prediction call (which output to explain)."
    )
    predict_file.add_run_arguments(parser)
    return parser


def _stem(path: str) -> str:
    """`path` without its extension, nor a .gz after it."""
    name = path[: -len(data.COMPRESSED)] if path.lower().endswith(data.COMPRESSED) else path
    return os.path.splitext(name)[0]


def default_output(path: str) -> str:
    return _stem(path) + "-explained.jsonl"


def check_args(args) -> str:
    """trainer.predict's checks, and this command's own; returns the output format."""
    args.output = args.output or default_output(args.input)
    for flag, value in (("--top-k", args.top_k), ("--ig-steps", args.ig_steps)):
        if value < 1:
            raise UserError(f"{flag}: must be at least 1, got {value}")
    out_fmt = predict_file.check_args(args)
    if out_fmt not in OUTPUT_FORMATS:
        raise UserError(
            f"--output: {args.output}: write .csv or .jsonl (or .json; any of them may end "
            f"in .gz): the top words are lists"
        )
    return out_fmt


def html_path(output: str) -> str:
    return _stem(output) + ".html"


def _words(explanation, top_k: int, pair: bool) -> list:
    from trainer.explaining import words

    return [
        {"word": w.text, "weight": round(w.weight, 6), **({"text": ("text", "text_pair")[w.segment]} if pair else {})}
        for w in words.top_words(explanation.words, top_k)
    ]


def explained_frame(frame, explanations, args, out_fmt: str, task, pair: bool):
    """`frame`'s rows, one per explanation (a row without any, an empty text, once, with a
    note), and the explanation's columns (the model's task's: its explanations part's columns)."""
    import pandas as pd

    records = []
    for (_, row), row_explanations in zip(frame.iterrows(), explanations):
        for e in row_explanations or [None]:
            top = None if e is None else _words(e, args.top_k, pair)
            records.append(
                {
                    **row.to_dict(),
                    **task.explanations.columns(e),
                    "ig_steps": e and e.steps,
                    "completeness_error": e and round(e.completeness_error, 6),
                    "top_words": top if out_fmt != "csv" or top is None else json.dumps(top, ensure_ascii=False),
                    predict_file.NOTE_COLUMN: "" if e else protocol.EMPTY_NOTE,
                }
            )
    return pd.DataFrame.from_records(records)


def _strings(values) -> list:
    """A column's texts, a missing value as an empty text (as trainer.predict reads them)."""
    import pandas as pd

    return ["" if pd.isna(t) else str(t) for t in values.tolist()]


def explain_file(model, args, out_fmt: str, handle) -> tuple:
    """Streams --input through the model into `handle`; returns (rows read, explanations,
    the HTML page's entries)."""
    from trainer.explaining import attribute
    from trainer.reporting import explanations as page

    rows, explained, entries, columns = 0, 0, [], None
    pair, task = loaded_model.is_pair_model(model), loaded_model.task_of(model)
    meter = progress.Progress("explained", args.log_every_seconds)
    for frame in data.file_frames(args.input, "--input", predict_file.CHUNK_ROWS, args.delimiter):
        if columns is None:
            columns = predict_file.text_columns(frame, args, pair, trained.model_columns(args.model_dir))
        frame = frame.drop(columns=["_file", "_row"])
        texts = _strings(frame[columns[0]])
        pairs = _strings(frame[columns[1]]) if columns[1] else None
        results = attribute.explain_texts(
            model, texts, pairs, args.ig_steps, args.target, args.batch_size, log_every_seconds=args.log_every_seconds
        )
        out = explained_frame(frame, results, args, out_fmt, task, pair)
        predict_file.write_frame(out, handle, out_fmt, first=rows == 0)
        for i, row_explanations in enumerate(results):
            own = (texts[i],) if pairs is None else (texts[i], pairs[i])  # the page: the user's words
            entries += [page.entry(e, pair, own, row=rows + i + 1) for e in row_explanations][
                : HTML_ROWS - len(entries)
            ]
            explained += len(row_explanations)
        rows += len(frame)
        meter.update(rows)
    return rows, explained, entries


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    cli.setup_logging()
    # Gradients of the SavedModel: no ONNX copy explains (an ONNX runtime environment has no TensorFlow)
    installed.require_tensorflow("trainer.explain (integrated gradients through the SavedModel)")
    trainer.import_tensorflow()
    out_fmt = check_args(args)
    from trainer.explaining import attribute
    from trainer.explaining import integrated_gradients as ig
    from trainer.reporting import explanations as page
    from trainer.serving import export

    with predict_file.written_output(args.output, out_fmt) as handle:
        refused = attribute.refusal(predict_file.check_input_columns(args).task(), args.model_dir)
        if refused:  # a tagger: said before its model loads
            raise UserError(refused)
        started = time.monotonic()
        model = export.load_module(args.model_dir)
        attribute.require_explainable(model, args.model_dir)
        print(
            f"loaded {args.model_dir} in {progress.clock(time.monotonic() - started)}; "
            f"integrated gradients with {args.ig_steps} steps from a {ig.BASELINE} baseline",
            flush=True,
        )
        rows, explained, entries = explain_file(model, args, out_fmt, handle)
    title = os.path.basename(args.input)
    storage.write_text_atomic(
        html_path(args.output),
        page.page(
            entries,
            title,
            args.ig_steps,
            loaded_model.is_pair_model(model),
            shown_of=explained if explained > len(entries) else None,
        ),
    )
    print(
        f"wrote {explained} explanations of {rows} rows to {args.output}; the coloured texts "
        f"to {html_path(args.output)}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
