"""`python -m trainer.evaluate`: an exported model scored on a labelled file, by the code that
scored its run's test split.

The file is read as training reads a split (labelled_file.py). The export predicts its rows
with the code trainer.predict runs (trainer.serving.predict_file, at --precision); its outputs are
turned back into the model's (Task.outputs_of_export) and the task decides as the export does
(Task.decide_as: its temperature, a binary model's threshold, multi-label's thresholds). Then
Task.summarize makes the block metrics.json holds for each split, and Task.split_predictions
and error_rows the rows errors.csv lists, worst first. So the run's own test file scores as its
metrics.json's `test` block says, but for float32 rounding: the run scores the trained model,
the export computes in float32.

The metrics are printed (the run's log line, each class's or type's scores, the confusion, the
worst errors) and, with --output, written as JSON with every error listed.
"""

import argparse
import contextlib
import os
import time

import numpy as np

import trainer
from trainer import progress, storage, strict_json
from trainer.data import splits
from trainer.errors import UserError
from trainer.inference import loaded_model
from trainer.reporting import error_rows
from trainer.reporting import predictions as exported_lib
from trainer.serving import labelled_file, predict_file, variants

CHUNK_ROWS = 8192  # rows predicted per call: their features and outputs, not the file's, in memory
SHOWN_ERRORS = 5  # errors printed; --output lists every one --report-errors asks for
UNSHOWN = ("split", "outcome", "rank", "text", "text_pair")  # errors.csv's columns not on their line
OUTPUT_SUFFIXES = (".json", ".json.gz")


def check_args(args) -> None:
    """Every flag and path that needs no model, before anything is read."""
    for flag, value, low in (
        ("--batch-size", args.batch_size, 1),
        ("--report-errors", args.report_errors, 0),
        ("--report-correct", args.report_correct, 0),
    ):
        if value < low:
            raise UserError(f"{flag}: must be at least {low}, got {value}")
    if not args.log_every_seconds > 0:
        raise UserError(f"--log-every-seconds: must be positive, got {args.log_every_seconds}")
    if args.output:
        if not args.output.lower().endswith(OUTPUT_SUFFIXES):
            raise UserError(
                f"--output: {args.output}: the metrics are written as JSON: name a .json file (or .json.gz)"
            )
        if storage.isdir(args.output):
            raise UserError(f"--output: {args.output} is a directory; name a file in it")
        if storage.exists(args.output) and not args.overwrite:
            raise UserError(f"--output: {args.output} exists; pass --overwrite to replace it")
    variants.require_model(args.model_dir)
    if not storage.exists(args.input):
        storage.require_bucket(args.input)
        raise UserError(f"--input: file not found: {args.input}")


def run(args) -> int:
    """Reads the file, loads the model, scores it, prints the metrics and writes --output."""
    check_args(args)
    precision, path = variants.resolve(args.model_dir, args.precision, runtime=args.runtime)
    saved = variants.signature_of(args.model_dir, path if variants.runtime_of(precision) == "onnx" else None)
    columns = argparse.Namespace(
        training_file=args.input,
        **{name: getattr(args, name) for name in ("delimiter", "text_column", "text_pair_column", "label_column")},
    )
    task = saved.task().scoring(columns)
    rows = labelled_file.read(args, task, saved.pair)
    # Written as trainer.predict writes: a scratch file opened before the model loads (an
    # unwritable --output is one line at once), renamed into place once all went well; one
    # JSON document, not predict's array of rows.
    written = predict_file.written_output(args.output, fmt="document") if args.output else contextlib.nullcontext()
    with written as handle:
        started = time.monotonic()
        model = variants.load(args.model_dir, precision)
        print(f"loaded the {precision} model ({path}) in {progress.clock(time.monotonic() - started)}", flush=True)
        block = score(model, task, rows, args)
        block.update(model_dir=args.model_dir, precision=precision)
        for line in describe(block, task):
            print(line, flush=True)
        if handle is not None:
            handle.write(strict_json.dumps(block, indent=2) + "\n")
    if args.output:
        print(f"wrote the metrics and {len(block['errors'])} errors to {args.output}", flush=True)
    return 0


def score(model, task, rows, args) -> dict:
    """The JSON of --output: the metrics of `rows` under the loaded export `model`, the
    decisions they were made at, what was skipped, and the worst errors."""
    first = loaded_model.predict_outputs(model, [""], 1, None if rows.pairs is None or task.compares_pairs else [""])
    names = task.export_names(first)
    if names is None:  # an export that names no classes (embeddings of labelled texts): the file's
        names = splits.label_spec(rows.frame, rows.label_column, rows.data, task).names
    labels, sentences = task.unit.labels_of(rows, task, names)
    temperature = exported_lib.decide_as_export(task, model)
    started = time.monotonic()
    outputs, at_limit = _outputs(model, task, rows, sentences, temperature, args)
    print(f"scored {len(rows.texts)} rows in {progress.clock(time.monotonic() - started)}", flush=True)
    result = task.summarize(outputs, labels, names)
    scored = task.split_predictions(outputs, labels, rows.texts, rows.pairs, temperature)
    split = os.path.basename(rows.path)
    errors = error_rows.worst_examples({split: scored}, names, args.report_errors, task, args.report_correct)
    reference = getattr(model, "float32", model)  # an int8 model's decisions: its float32 export's
    return {
        "input": rows.path,
        "task": task.name,
        "labels": names,
        "label_column": rows.label_column,
        "rows": len(rows.texts),
        "rows_skipped": {"empty_text": rows.skipped},
        "repaired_tags": getattr(rows.tagged, "repaired", 0),
        "texts_at_limit": at_limit,
        "limit_note": predict_file.limit_note(model, at_limit, len(rows.texts)) if at_limit else None,
        "decisions": {"temperature": temperature, **task.decisions_of_export(reference)},
        "metrics": result,
        "errors": errors.to_dict(orient="records"),
        "trainer_version": trainer.__version__,
    }


def _outputs(model, task, rows, sentences, temperature: float, args) -> tuple:
    """(the model's outputs of every row, as summarize reads them; the rows at the model's
    length limit), predicted CHUNK_ROWS at a time."""
    parts, at_limit = [], 0
    meter = progress.Progress("scored", args.log_every_seconds, total=len(rows.texts))
    for start in range(0, len(rows.texts), CHUNK_ROWS):
        end = min(start + CHUNK_ROWS, len(rows.texts))
        texts = list(rows.texts[start:end])
        pairs = None if rows.pairs is None else list(rows.pairs[start:end])
        if task.compares_pairs and pairs is not None:  # a model of one text: each side alone, [n, 2, ...]
            sides = [_chunk_outputs(model, task, side, None, temperature, None, args) for side in (texts, pairs)]
            parts.append(np.stack([output for output, _ in sides], axis=1))
            at_limit += sum(limit for _, limit in sides)
        else:
            chunk = None if sentences is None else sentences[start:end]
            output, limit = _chunk_outputs(model, task, texts, pairs, temperature, chunk, args)
            parts.append(output)
            at_limit += limit
        meter.update(end)
    return _joined(parts), at_limit


def _chunk_outputs(model, task, texts, pairs, temperature: float, sentences, args) -> tuple:
    """(the outputs of a chunk's rows as summarize reads them, the rows at the length limit)."""
    features = loaded_model.tokenize(model, texts, pairs) if loaded_model.tokenizes(model) else None
    exported = loaded_model.predict_outputs(model, texts, args.batch_size, pairs, features)
    return task.outputs_of_export(exported, temperature, sentences), predict_file.at_limit(features)


def _joined(parts: list) -> np.ndarray:
    """The chunks' outputs as one array; per-word outputs [n, words, tags] padded with zeros to
    the longest chunk's words (past a sentence's words its labels mark nothing to score)."""
    if parts[0].ndim == 3:
        width = max(p.shape[1] for p in parts)
        parts = [np.pad(p, [(0, 0), (0, width - p.shape[1]), (0, 0)]) for p in parts]
    return np.concatenate(parts)


def describe(block: dict, task) -> list:
    """The lines a person reads: the run's log line of the metrics, then the tables."""
    metrics = block["metrics"]
    lines = [f"{os.path.basename(block['input'])}: {task.describe(metrics)}  ({metrics['examples']} rows)"]
    if block["rows_skipped"]["empty_text"]:
        lines.append(
            f"{block['rows_skipped']['empty_text']} rows with an empty text were skipped "
            f"(trainer.predict gives them no prediction)"
        )
    if block["repaired_tags"]:
        lines.append(
            f"{block['repaired_tags']} I- tags continued no entity of their type and were "
            f"read as B-, as training reads them"
        )
    if block["limit_note"]:
        lines.append(block["limit_note"])
    for key, value in metrics.items():
        lines += _scores_table(key, value) + _confusion(key, value, block["labels"])
    return lines + _worst(block["errors"])


def _scores_table(key: str, value) -> list:
    """A per-class (per-label, per-type) block of precision, recall, F1 and support as a table."""
    if not (isinstance(value, dict) and value and all(isinstance(v, dict) and "f1" in v for v in value.values())):
        return []
    width = max(len(str(name)) for name in value)
    rows = [
        f"  {str(name):<{width}}  {v['precision']:9.4f}  {v['recall']:6.4f}  {v['f1']:6.4f}  "
        f"{v.get('support', '')!s:>7}"
        for name, v in value.items()
    ]
    return [f"{key}:", f"  {'':<{width}}  precision  recall      F1  support", *rows]


def _confusion(key: str, value, labels: list) -> list:
    """A confusion matrix, true rows against predicted columns: of classes (a list of rows) or
    of entity types (its `types` and `matrix`)."""
    if isinstance(value, dict) and {"types", "matrix"} <= set(value):
        names, matrix = value["types"], value["matrix"]
    elif key.startswith("confusion") and isinstance(value, list):
        names, matrix = labels, value
    else:
        return []
    width = max(len(str(n)) for n in names) + 2
    header = "".join(f"{str(n):>{width}}" for n in names)
    return [
        f"{key} (rows: true, columns: predicted):",
        f"  {'':<{width}}{header}",
        *(f"  {str(n):<{width}}" + "".join(f"{c:>{width}}" for c in row) for n, row in zip(names, matrix)),
    ]


def _worst(errors: list) -> list:
    """The first SHOWN_ERRORS rows of errors.csv's, each on a line."""
    errors = [e for e in errors if e.get("outcome", "error") == "error"][:SHOWN_ERRORS]
    if not errors:
        return []

    def shown(e):
        shown = [(k, v) for k, v in e.items() if k not in UNSHOWN]
        return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in shown)

    return ["worst errors:", *(f"  {shown(e)}: {str(e['text'])[:80]!r}" for e in errors)]
