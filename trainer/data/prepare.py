"""`python -m trainer.prepare`: raw labelled files -> stratified train/eval/test CSVs.

The files are read the way the trainer reads them, with its own flags: single texts or sentence
pairs, and a label column read as classes (scores, class ids or names), a number (`--task
regression`) or label sets (`--task multi-label`). Each split is stratified over what the model
will see: the classes; for regression, bins of the score (quantiles); for multi-label, each
row's rarest label. Rows that repeat a text (and pair) stay in the split of its first
occurrence, so no text is in two splits. The files keep every original column.
"""
import argparse
import io

from trainer import cli, helptext, storage, tasks
from trainer.config import DataConfig
from trainer.errors import UserError


def build_arg_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m trainer.prepare", description=__doc__.splitlines()[0],
                                formatter_class=helptext.DefaultsShown)
    parser.add_argument("--input", required=True,
                        help="Raw files (CSV/TSV/JSONL), comma-separated or a glob; local or gs://.")
    parser.add_argument("--output-dir", required=True, help="Where train.csv, eval.csv, test.csv go.")
    parser.add_argument("--task", default=tasks.AUTO, choices=tasks.CHOICES,
                        help="What the label is, as the trainer's --task: 'auto' and "
                             "'classification' (classes), 'regression' (a number), 'multi-label'.")
    parser.add_argument("--text-column", default=None, help="Default: detected as the trainer does (first of its known names present).")
    parser.add_argument("--text-pair-column", default=None,
                        help="The second text of sentence pairs. Default: detected as the trainer "
                             "does (sentence1/sentence2, question1/question2, ...).")
    parser.add_argument("--label-column", default=None, help="Default: detected as the trainer does (first of its known names present).")
    parser.add_argument("--label-type", default="auto", choices=("auto", "score", "index", "name"),
                        help="How to read the label column, as the trainer's --label-type.")
    parser.add_argument("--label-names", default=None, help="As the trainer's --label-names.")
    parser.add_argument("--label-columns", default=None,
                        help="--task multi-label: comma-separated 0/1 columns, one per label.")
    parser.add_argument("--label-separator", default="|",
                        help="--task multi-label: the separator of the label names in one cell.")
    parser.add_argument("--delimiter", default=None,
                        help="As the trainer's --delimiter: the field separator of .csv files "
                             "(';' for a CSV saved by Excel in a European locale). Default: ','.")
    parser.add_argument("--allow-label-variants", action="store_true",
                        help="As the trainer's flag: keep labels that differ only in case or "
                             "Unicode normalization as separate classes.")
    parser.add_argument("--eval-fraction", type=float, default=0.1,
                        help="Share of the rows in eval.csv, in (0, 0.5); stratified.")
    parser.add_argument("--test-fraction", type=float, default=0.1,
                        help="Share of the rows in test.csv, in (0, 0.5); stratified.")
    parser.add_argument("--seed", type=int, default=42, help="Seed of the random split.")
    parser.add_argument("--overwrite", action="store_true", help="Replace existing split files.")
    return parser


def split_indices(strata, eval_fraction: float, test_fraction: float, seed: int):
    """(train, eval, test) row indices, each stratified by `strata`, each sorted."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    rows = np.arange(len(strata))
    held = eval_fraction + test_fraction
    try:
        train, rest = train_test_split(rows, test_size=held, random_state=seed, stratify=strata)
        evaluation, test = train_test_split(rest, test_size=test_fraction / held, random_state=seed,
                                            stratify=strata[rest])
    except ValueError as e:
        raise UserError(f"--input: cannot split {len(strata)} rows stratified by label: {e}. "
                        f"Each class needs a few examples per split.") from None
    return np.sort(train), np.sort(evaluation), np.sort(test)


def _minimum_stratum(eval_fraction: float, test_fraction: float) -> int:
    """Rows a stratum needs for two rows of it to land in the smaller held-out split."""
    import math

    return max(2, math.ceil(2 / min(eval_fraction, test_fraction)))


def read_labelled(args):
    """(frame, label spec, labels) of --input, read as the trainer reads a training file."""
    from trainer.config import Config, ModelConfig, TrainConfig, validate
    from trainer import reading
    from trainer.data import splits

    data = DataConfig(text_column=args.text_column, text_pair_column=args.text_pair_column,
                      label_column=args.label_column, label_type=args.label_type,
                      label_names=args.label_names, label_columns=args.label_columns,
                      label_separator=args.label_separator, delimiter=args.delimiter,
                      allow_label_variants=args.allow_label_variants)
    config = Config(data=data, model=ModelConfig(task=args.task))
    task = tasks.from_config(config)
    config.train = TrainConfig(selection_metric=task.default_metric)
    validate(config)  # the trainer's own checks of these flags (e.g. --label-columns needs multi-label)
    reading.check_delimiter(args.delimiter)
    frame = reading.read_files(args.input, "--input", args.delimiter)
    columns = reading.pick_text_columns(frame, args.text_column, args.text_pair_column)
    label_column, label_columns = task.label_columns(frame, data)
    frame = reading.conform(frame, list(label_columns))
    splits.check_columns(frame, columns, label_columns)
    labels_frame = frame[list(label_columns) + ["_file", "_row"]]
    spec = splits.label_spec(labels_frame, label_column, data, task)
    labels = splits.encode(labels_frame, label_columns, spec, "train", task)
    task.check_labels(labels_frame, label_column, labels, spec, data)
    return task, frame, columns, spec, labels


def text_groups(frame, columns):
    """(group of each row, first row of each group): rows that hold the same text (and pair)
    form one group, numbered in order of first appearance (no repeats: group i is row i)."""
    import numpy as np

    from trainer.data import leakage

    _, first, inverse = np.unique(leakage.text_hashes(frame, columns), return_index=True,
                                  return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.ravel()], first[order]


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    import numpy as np  # after --help, which answers without it

    for flag, value in (("--eval-fraction", args.eval_fraction), ("--test-fraction", args.test_fraction)):
        if not 0.0 < value < 0.5:
            raise UserError(f"{flag}: must be in (0, 0.5), got {value}")
    names = ("train.csv", "eval.csv", "test.csv")
    out = args.output_dir.rstrip("/")
    task, frame, text_columns, spec, labels = read_labelled(args)
    existing = [n for n in names if storage.exists(f"{out}/{n}")]
    if existing and not args.overwrite:
        raise UserError(f"--output-dir: {out} already has {', '.join(existing)}; pass --overwrite to replace them")
    strata = task.prepare_strata(labels, _minimum_stratum(args.eval_fraction, args.test_fraction))
    group, firsts = text_groups(frame, text_columns)
    parts = [np.flatnonzero(np.isin(group, chosen)) for chosen in
             split_indices(strata[firsts], args.eval_fraction, args.test_fraction, args.seed)]
    if len(firsts) < len(frame):
        print(f"{len(frame) - len(firsts)} rows repeat the text of an earlier row: each is in "
              f"the split of that row, so no text is in two splits")
    columns = [c for c in frame.columns if not str(c).startswith("_")]
    for name, index in zip(names, parts):
        buffer = io.StringIO()
        frame.iloc[index][columns].to_csv(buffer, index=False)
        storage.write_text_atomic(f"{out}/{name}", buffer.getvalue())
        print(f"{name:9s} {len(index):6d} rows: {task.label_summary(labels[index], spec)}")
    return 0
