"""`python -m trainer.prepare`: raw labelled files -> stratified train/eval/test CSVs.

The label column is read the way the trainer reads it (scores, class ids or names), so the
stratification is over the classes the model will see; the files keep every original column.
"""
import argparse
import io

from trainer import cli, helptext, storage
from trainer.config import DataConfig
from trainer.errors import UserError


def build_arg_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m trainer.prepare", description=__doc__.splitlines()[0],
                                     formatter_class=helptext.DefaultsShown)
    parser.add_argument("--input", required=True,
                        help="Raw files (CSV/TSV/JSONL), comma-separated or a glob; local or gs://.")
    parser.add_argument("--output-dir", required=True, help="Where train.csv, eval.csv, test.csv go.")
    parser.add_argument("--text-column", default=None, help="Default: detected as the trainer does (first of its known names present).")
    parser.add_argument("--label-column", default=None, help="Default: detected as the trainer does (first of its known names present).")
    parser.add_argument("--label-type", default="auto", choices=("auto", "score", "index", "name"),
                        help="How to read the label column, as the trainer's --label-type.")
    parser.add_argument("--eval-fraction", type=float, default=0.1,
                        help="Share of the rows in eval.csv, in (0, 0.5); stratified by label.")
    parser.add_argument("--test-fraction", type=float, default=0.1,
                        help="Share of the rows in test.csv, in (0, 0.5); stratified by label.")
    parser.add_argument("--seed", type=int, default=42, help="Seed of the random split.")
    parser.add_argument("--overwrite", action="store_true", help="Replace existing split files.")
    return parser


def split_indices(labels, eval_fraction: float, test_fraction: float, seed: int):
    """(train, eval, test) row indices, each stratified by label, each sorted."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    rows = np.arange(len(labels))
    held = eval_fraction + test_fraction
    try:
        train, rest = train_test_split(rows, test_size=held, random_state=seed, stratify=labels)
        evaluation, test = train_test_split(rest, test_size=test_fraction / held, random_state=seed,
                                            stratify=labels[rest])
    except ValueError as e:
        raise UserError(f"--input: cannot split {len(labels)} rows stratified by label: {e}. "
                        f"Each class needs a few examples per split.") from None
    return np.sort(train), np.sort(evaluation), np.sort(test)


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    # Imported only now: --help and flag errors answer before numpy and pandas load.
    import numpy as np

    from trainer.data import labels as labels_lib, reading

    for flag, value in (("--eval-fraction", args.eval_fraction), ("--test-fraction", args.test_fraction)):
        if not 0.0 < value < 0.5:
            raise UserError(f"{flag}: must be in (0, 0.5), got {value}")
    frame = reading.read_files(args.input, "--input")
    reading.pick_column(frame, args.text_column, reading.TEXT_COLUMNS, "--text-column", "text")  # must exist
    label_column = reading.pick_column(frame, args.label_column, reading.LABEL_COLUMNS, "--label-column", "label")
    spec = labels_lib.infer_labels(frame, label_column, DataConfig(label_type=args.label_type))
    labels = labels_lib.encode_labels(frame, label_column, spec, "train")
    names = ("train.csv", "eval.csv", "test.csv")
    out = args.output_dir.rstrip("/")
    existing = [n for n in names if storage.exists(f"{out}/{n}")]
    if existing and not args.overwrite:
        raise UserError(f"--output-dir: {out} already has {', '.join(existing)}; pass --overwrite to replace them")
    parts = split_indices(labels, args.eval_fraction, args.test_fraction, args.seed)
    columns = [c for c in frame.columns if not str(c).startswith("_")]
    for name, index in zip(names, parts):
        buffer = io.StringIO()
        frame.iloc[index][columns].to_csv(buffer, index=False)
        storage.write_text_atomic(f"{out}/{name}", buffer.getvalue())
        counts = np.bincount(labels[index], minlength=len(spec.names))
        share = ", ".join(f"{label} {count} ({count / len(index):.0%})"
                          for label, count in zip(spec.names, counts))
        print(f"{name:9s} {len(index):6d} rows: {share}")
    return 0
