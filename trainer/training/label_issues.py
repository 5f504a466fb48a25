"""label_issues.csv: the rows whose given label looks wrong, most doubtful first.

A label looks wrong when a model that never trained on its row gives it a low probability:
cleanlab's confident learning (`find_label_issues`: per-class thresholds on out-of-sample
probabilities, Northcutt et al. 2021) decides which rows are flagged, and each row's label
quality score (the probability of its given label, cleanlab's "self_confidence") ranks them.
The out-of-sample probabilities are the validation split's (the run's model never trained on
it) and, with --find-label-issues, the training split's from k-fold cross-fitting
(trainer.training.cross_fit). All are the models' uncalibrated probabilities (the folds have no
temperature of their own); a multi-label task is ranked by cleanlab.multilabel_classification.
Regression has no label to doubt this way: no file.

The flagged training rows are ranked by the mean of two probabilities of their label: the
folds' (out of sample) and the run's own model's at its best validation epoch (in sample). A
network fits the clean majority of its rows before it memorizes the noisy ones (Arpit et al.
2017, "A Closer Look at Memorization in Deep Networks"; Co-teaching's small-loss rows, Han et
al. 2018), and the best epoch comes before the flips are learned, so the run's model doubts
them more sharply than the folds, each trained on less. On SST-2 with 5% of the labels flipped
(bench/label_issues.py, docs/label-issues.md) the mean ranks the flagged rows about as well as
the run's model alone and well above the folds alone; and a run that has memorized its rows (a
late best epoch) gives every row a probability near 1, which leaves the folds' order. The folds
alone decide which rows are flagged, as cleanlab asks.

Each row is named as every error message names it: its file and its line in that file (the
header is line 1), so `row` is where an editor's cursor goes.
"""

import logging
import warnings

import numpy as np
import pandas as pd

from trainer import storage
from trainer.training.context import RunContext

log = logging.getLogger("trainer")

FILE = "label_issues.csv"
COLUMNS = ["split", "file", "row", "given_label", "suggested_label", "score", "text"]
METHOD = (
    "cleanlab find_label_issues on out-of-sample probabilities, ranked by label quality "
    "(self_confidence); training rows by the mean of the folds' and the run's model's"
)


def rank(task, probabilities: np.ndarray, labels: np.ndarray, ranking_probabilities: np.ndarray | None = None) -> tuple:
    """(flagged row indices, most doubtful first; every row's label quality score in [0, 1]),
    by the task's cleanlab ranking (its label_issues part's rank).

    `probabilities`: out-of-sample [N, C] class probabilities, or [N, L] label probabilities
    (multi-label), which decide the flagged rows; `ranking_probabilities` (default: the same)
    give the scores that order them; `labels`: class ids [N], or 0/1 [N, L]."""
    ranking_probabilities = probabilities if ranking_probabilities is None else ranking_probabilities
    # The tasks call cleanlab with n_jobs=1: by default it forks a multiprocessing.Pool (one
    # process per core) on Linux, and a fork of a process whose TensorFlow and gRPC threads hold
    # locks can hang the child; a multi-worker run's non-chief worker hung here after its export
    # (CPython's own default moved away from fork for this reason: python/cpython#84559). The
    # result is the same.
    # cleanlab warns, per class, when a class has too few rows to flag all of its issues: the
    # flagged rows are still right, and the warning would reach the user's log as a Python
    # warning (cleanlab/filter.py: "May not flag all label issues in class").
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="May not flag all label issues", category=UserWarning)
        flagged, scores = task.label_issues.rank(probabilities, labels, ranking_probabilities)
    # A boolean mask of the rows: cleanlab returns one when no ranking is asked of it.
    flagged, scores = np.flatnonzero(flagged), np.asarray(scores, np.float64)
    return flagged[np.argsort(scores[flagged], kind="stable")], scores


def find_label_issues(ctx: RunContext) -> None:
    """The stage: label_issues.csv (chief), one log line, metrics.json's label_issues block."""
    if ctx.task.label_issues is None:
        return
    validation = ctx.task.label_issues.probabilities(ctx.outputs["validation"][0])
    splits = {"validation": (validation, validation, ctx.datasets.validation.labels)}
    warning = None
    if ctx.config.train.find_label_issues:
        out_of_sample, ranking, folds = _training_probabilities(ctx)
        warning = chance_warning(ctx.task, out_of_sample, ctx.datasets.train.labels, folds)
        splits = {"train": (out_of_sample, ranking, ctx.datasets.train.labels), **splits}
    frames, counts = [], {}
    for name, (probabilities, ranking, labels) in splits.items():
        flagged, scores = rank(ctx.task, probabilities, labels, ranking)
        counts[name] = {"flagged": int(len(flagged)), "of": int(len(labels))}
        frames.append(_frame(ctx, name, flagged, scores[flagged], labels[flagged], probabilities[flagged]))
    # Empty frames left out: pandas warns when it concatenates them (their dtypes are unknown).
    table = pd.concat([f for f in frames if len(f)] or frames[:1], ignore_index=True)
    table = table.sort_values("score", kind="stable")
    if ctx.is_chief:
        storage.write_text_atomic(storage.join(ctx.paths.job_dir, FILE), table.to_csv(index=False, float_format="%.6g"))
    ctx.label_issues = {
        "file": FILE,
        "rows": int(len(table)),
        "splits": counts,
        "method": METHOD,
        "folds": ctx.config.train.label_issue_folds if "train" in splits else None,
        "warning": warning,
    }
    log.info(
        "label issues: %d rows whose label looks wrong (%s), most doubtful first in %s",
        len(table),
        ", ".join(f"{name} {c['flagged']} of {c['of']}" for name, c in counts.items()),
        storage.join(ctx.paths.job_dir, FILE),
    )
    if warning:
        log.warning("label issues: %s", warning)


def _training_probabilities(ctx: RunContext) -> tuple:
    """(the folds' out-of-sample probabilities of the training rows, their mean with the run's
    model's, each row's fold). The run's model predicts first: it holds its best epoch's
    weights now."""
    from trainer.training import cross_fit, fitting

    log.info(
        "label issues: the run's model (its best epoch) predicts its %d training rows, to rank the flagged ones",
        len(ctx.inputs.tokenized["train"]),
    )
    in_sample = ctx.task.label_issues.probabilities(fitting.predict_split(ctx, "train")[0])
    outputs, folds = cross_fit.out_of_sample_outputs(ctx)
    out_of_sample = ctx.task.label_issues.probabilities(outputs)
    return out_of_sample, mean_of_views(out_of_sample, in_sample), folds


def chance_warning(task, probabilities: np.ndarray, labels: np.ndarray, folds: np.ndarray) -> str | None:
    """Why the training rows' ranking cannot be trusted, or None: a fold whose model is right on
    its held-out rows no more often than always answering their most common class (multi-label:
    each label decided at 0.5, against each label's more common answer) has learned nothing to
    doubt a label by, and cleanlab then flags rows on near-chance probabilities."""
    weak = []
    for fold in range(int(folds.max()) + 1):
        held = folds == fold
        accuracy, constant = task.label_issues.chance_accuracies(probabilities[held], labels[held])
        if accuracy <= constant:
            weak.append(
                f"fold {fold + 1} (trained on {int(np.sum(~held))} rows) was right on "
                f"{accuracy:.0%} of its {int(np.sum(held))} held-out rows, always "
                f"answering their most common class on {constant:.0%}"
            )
    if not weak:
        return None
    return (
        f"the training rows' ranking cannot be trusted: {len(weak)} of {int(folds.max()) + 1} "
        f"fold models did no better than chance ({'; '.join(weak)}), so the scores of their "
        f"rows are near chance too. More training rows, or more --label-issue-folds (each "
        f"trains on more of them), give models worth asking"
    )


def mean_of_views(out_of_sample: np.ndarray, in_sample: np.ndarray) -> np.ndarray:
    """The probabilities that rank the flagged training rows: the folds' and the run's model's,
    weighted equally. An equal weight needs no tuning on labels we do not trust, and a run's
    model that has memorized its rows adds a near-constant, which keeps the folds' order."""
    return (out_of_sample + in_sample) / 2


def _frame(
    ctx: RunContext, name: str, flagged: np.ndarray, scores: np.ndarray, labels: np.ndarray, probabilities: np.ndarray
) -> pd.DataFrame:
    spec = ctx.datasets.labels
    part = ctx.task.label_issues
    given, suggested = part.label_texts(labels, spec), part.suggested_labels(probabilities, spec)
    located = locate(ctx.datasets, name, flagged)
    frame = pd.DataFrame(
        {
            "split": name,
            "file": located["file"],
            "row": located["row"],
            "given_label": given,
            "suggested_label": suggested,
            "score": scores,
            "text": located["text"],
        },
        columns=COLUMNS,
    )
    if "text_pair" in located:
        frame["text_pair"] = located["text_pair"]
    return frame


def locate(datasets, name: str, rows: np.ndarray) -> pd.DataFrame:
    """file, row (its line in that file), text (and text_pair) of rows `rows` of split `name`,
    in the order given: one pass over the split's files, reading only those rows."""
    split = datasets.splits()[name]
    order = np.argsort(rows, kind="stable")
    wanted = {name: split.positions[np.asarray(rows, np.int64)[order]]}
    parts = [frame for _, frame in datasets.selected_chunks(split.spec, wanted)]
    found = (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["_file", "_row", *datasets.text_columns()])
    )
    out = pd.DataFrame(
        {
            "file": found["_file"].astype(str).to_numpy(),
            "row": found["_row"].to_numpy(np.int64),
            "text": found[datasets.text_column].astype(str).to_numpy(),
        }
    )
    if datasets.text_pair_column:
        out["text_pair"] = found[datasets.text_pair_column].astype(str).to_numpy()
    return out.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)
