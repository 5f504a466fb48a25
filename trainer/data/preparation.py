"""`python -m trainer.prepare`: raw labelled files -> stratified train/eval/test files.

The files are read the way the trainer reads them, with its own flags: single texts or sentence
pairs, and a label column read as classes (scores, class ids or names), a number (`--task
regression`) or label sets (`--task multi-label`); or tagged sentences (`--task
token-classification`, which `--task auto` picks for them as the trainer's does: CoNLL or JSON
Lines, tasks/tagging/prepare.py). Each split is stratified over what the model will see: the classes;
for regression, bins of the score (quantiles); for multi-label, each row's rarest label; for
tagged sentences, each one's rarest entity type. Rows that repeat a text (and pair), and
sentences that repeat one, stay in the split of the first, so no text is in two splits. A
table's splits are CSVs that keep every original column; tagged sentences are written as they
came, in files of the input's extension.
"""

import argparse
import dataclasses
import io
from collections.abc import Callable

from trainer import cli, helptext, storage, task_registry
from trainer.config import DataConfig
from trainer.errors import UserError

SPLITS = ("train", "eval", "test")


@dataclasses.dataclass
class Labelled:
    """What is split: each row's labels and the hash of its text (rows that share one stay in one
    split), and how a split's file is written."""

    spec: object  # data.labels.LabelSpec (which imports numpy, which --help does without)
    labels: object  # numpy, a row per row
    keys: object  # uint64 per row
    extension: str  # of the files written
    noun: str  # what a row is, in the lines printed
    render: Callable  # row indices -> the text of their file


def build_arg_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m trainer.prepare", description=__doc__.splitlines()[0], formatter_class=helptext.DefaultsShown
    )
    parser.add_argument(
        "--input",
        required=True,
        help="Raw files (CSV/TSV/JSONL, or tagged sentences: CoNLL, JSON Lines of "
        "tokens and tags or of text and spans), comma-separated or a glob; "
        "local or gs://.",
    )
    parser.add_argument(
        "--output-dir",
        required=True,
        help="Where train.csv, eval.csv, test.csv go (tagged sentences: train, eval "
        "and test with the input's extension, e.g. train.conll).",
    )
    parser.add_argument(
        "--task",
        default=task_registry.AUTO,
        choices=task_registry.choices(),
        help="What the label is, as the trainer's --task: 'classification' "
        "(classes), 'regression' (a number), 'multi-label' (label sets), "
        "'token-classification' (tagged sentences; .txt and .tsv of CoNLL "
        "lines with this task only). 'auto': token-classification for "
        "tagged sentences, else classification.",
    )
    parser.add_argument(
        "--text-column", default=None, help="Default: detected as the trainer does (first of its known names present)."
    )
    parser.add_argument(
        "--text-pair-column",
        default=None,
        help="The second text of sentence pairs. Default: detected as the trainer "
        "does (sentence1/sentence2, question1/question2, ...).",
    )
    parser.add_argument(
        "--label-column", default=None, help="Default: detected as the trainer does (first of its known names present)."
    )
    parser.add_argument(
        "--label-type",
        default="auto",
        choices=("auto", "score", "index", "name"),
        help="How to read the label column, as the trainer's --label-type.",
    )
    parser.add_argument("--label-names", default=None, help="As the trainer's --label-names.")
    parser.add_argument(
        "--label-columns", default=None, help="--task multi-label: comma-separated 0/1 columns, one per label."
    )
    parser.add_argument(
        "--label-separator", default="|", help="--task multi-label: the separator of the label names in one cell."
    )
    parser.add_argument(
        "--delimiter",
        default=None,
        help="As the trainer's --delimiter: the field separator of .csv files "
        "(';' for a CSV saved by Excel in a European locale). Default: ','.",
    )
    parser.add_argument(
        "--allow-label-variants",
        action="store_true",
        help="As the trainer's flag: keep labels that differ only in case or "
        "Unicode normalization as separate classes.",
    )
    parser.add_argument(
        "--eval-fraction",
        type=float,
        default=0.1,
        help="Share of the rows (or tagged sentences) in eval.csv (or eval with "
        "a tagged input's extension), in (0, 0.5); stratified.",
    )
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.1,
        help="Share of the rows (or tagged sentences) in test.csv, in (0, 0.5); stratified.",
    )
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
        evaluation, test = train_test_split(
            rest, test_size=test_fraction / held, random_state=seed, stratify=strata[rest]
        )
    except ValueError as e:
        raise UserError(
            f"--input: cannot split {len(strata)} rows stratified by label: {e}. "
            f"Each class needs a few examples per split."
        ) from None
    return np.sort(train), np.sort(evaluation), np.sort(test)


def _minimum_stratum(eval_fraction: float, test_fraction: float) -> int:
    """Rows a stratum needs for two rows of it to land in the smaller held-out split."""
    import math

    return max(2, math.ceil(2 / min(eval_fraction, test_fraction)))


def task_of(args):
    """--task, checked with the other flags as the trainer checks them (e.g. --label-columns
    needs multi-label); 'auto' decided by --input as the trainer's --task auto decides by its
    training file."""
    from trainer.config import Config, ModelConfig, validate

    name = (task_registry.auto_task(args.input) or task_registry.AUTO) if args.task == task_registry.AUTO else args.task
    config = Config(data=dataclasses.replace(data_config(args), training_file=args.input), model=ModelConfig(task=name))
    task_registry.settle(config)  # what the kind leaves to the data (embeddings: the loss)
    task = task_registry.from_config(config)
    config.train.selection_metric = task.default_metric
    validate(config)
    return task


def data_config(args) -> DataConfig:
    return DataConfig(
        text_column=args.text_column,
        text_pair_column=args.text_pair_column,
        label_column=args.label_column,
        label_type=args.label_type,
        label_names=args.label_names,
        label_columns=args.label_columns,
        label_separator=args.label_separator,
        delimiter=args.delimiter,
        allow_label_variants=args.allow_label_variants,
    )


def read_labelled(args, task) -> Labelled:
    """--input's rows, read as the trainer reads a training file; written back as CSV with
    every original column."""
    from trainer import reading
    from trainer.data import leakage, splits

    data = data_config(args)
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
    kept = [c for c in frame.columns if not str(c).startswith("_")]

    def render(index) -> str:
        buffer = io.StringIO()
        frame.iloc[index][kept].to_csv(buffer, index=False)
        return buffer.getvalue()

    return Labelled(spec, labels, leakage.text_hashes(frame, columns), ".csv", "row", render)


def text_groups(keys):
    """(group of each row, first row of each group): rows whose texts share a hash `keys` form
    one group, numbered in order of first appearance (no repeats: group i is row i)."""
    import numpy as np

    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
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
    out = args.output_dir.rstrip("/")
    task = task_of(args)
    rows = task.unit.prepare_rows(args, task)
    names = [f"{split}{rows.extension}" for split in SPLITS]
    existing = [n for n in names if storage.exists(f"{out}/{n}")]
    if existing and not args.overwrite:
        raise UserError(f"--output-dir: {out} already has {', '.join(existing)}; pass --overwrite to replace them")
    strata = task.prepare_strata(rows.labels, _minimum_stratum(args.eval_fraction, args.test_fraction))
    group, firsts = text_groups(rows.keys)
    parts = [
        np.flatnonzero(np.isin(group, chosen))
        for chosen in split_indices(strata[firsts], args.eval_fraction, args.test_fraction, args.seed)
    ]
    if len(firsts) < len(rows.keys):
        print(
            f"{len(rows.keys) - len(firsts)} {rows.noun}s repeat the text of an earlier "
            f"{rows.noun}: each is in the split of that {rows.noun}, so no text is in two splits"
        )
    for name, index in zip(names, parts):
        storage.write_text_atomic(f"{out}/{name}", rows.render(index))
        print(f"{name:9s} {len(index):6d} {rows.noun}s: {task.label_summary(rows.labels[index], rows.spec)}")
    return 0
