"""--target-precision / --target-recall: the decision threshold a binary or multi-label model
exports, chosen on validation once the probabilities are final (after calibration), so that
trainer.predict and trainer.serve decide at the precision or recall the user asked for.

A binary classifier's positive class is its second label (class id 1; of names, the later one
in the run's label order, which the log and metrics.json print): it is predicted when its
probability reaches the threshold. A multi-label model gets one threshold per label. A target
that validation cannot reach leaves that decision as it is without the flag (a binary model's
most probable class, a label's F1-chosen threshold), with one warning line saying what was
reached: the run has trained already, and a model that decides as usual serves users better
than no model; metrics.json records `reached: false`.
"""

import logging

import numpy as np

from trainer.tasks import parts
from trainer.training.context import RunContext

log = logging.getLogger("trainer")


def target_of(output_config) -> tuple | None:
    """("precision" or "recall", value), or None when neither flag is given."""
    if output_config.target_precision is not None:
        return "precision", output_config.target_precision
    if output_config.target_recall is not None:
        return "recall", output_config.target_recall
    return None


def check_task(task, label_names, output_config) -> None:
    """The flags need one yes/no decision per label: a task with an operating point
    (trainer.tasks.parts refuses the others), whose labels leave one (OperatingPoint.check)."""
    target = target_of(output_config)
    if target is not None:
        flag = f"--target-{target[0]}"
        parts.require(task, "operating_point", flag).check(label_names, flag)


def choose_threshold(scores: np.ndarray, truth: np.ndarray, target: str, value: float) -> dict:
    """On these rows: with target "precision", the lowest threshold whose precision reaches
    `value` (it keeps the most recall); with "recall", the highest threshold whose recall
    reaches it (it keeps the most precision). A row is predicted positive when its score is at
    or above the threshold. The threshold sits halfway between the validation score that decides
    and the next lower one (half that score when none is lower): the same decisions on
    validation, and none of its rows on the boundary, where a text repeated in validation would
    flip on a rounding (the bfloat16 copy's).

    Returns {"reached", "threshold", "precision", "recall"}: unreached, the threshold is None
    and precision and recall are those of the candidate that came closest to the target.
    """
    from sklearn.metrics import precision_recall_curve

    truth = np.asarray(truth, bool)
    if not truth.any():
        return {
            "reached": False,
            "threshold": None,
            "precision": None,
            "recall": None,
            "why": "no positive rows in validation",
        }
    precision, recall, thresholds = precision_recall_curve(truth, np.asarray(scores, np.float64))
    precision, recall = precision[:-1], recall[:-1]  # the last point has no threshold
    achieved = precision if target == "precision" else recall
    ok = np.flatnonzero(achieved >= value)
    if len(ok):
        i = ok[0] if target == "precision" else ok[-1]
        below = thresholds[i - 1] if i else 0.0
        return {
            "reached": True,
            "threshold": float((below + thresholds[i]) / 2),
            "precision": float(precision[i]),
            "recall": float(recall[i]),
        }
    i = int(np.argmax(achieved))
    return {
        "reached": False,
        "threshold": None,
        "precision": float(precision[i]),
        "recall": float(recall[i]),
        "why": f"the highest validation {target} is {achieved[i]:.4f}",
    }


def rates_at(scores: np.ndarray, truth: np.ndarray, threshold: float) -> dict:
    """Precision and recall of `scores >= threshold` (another split's, at the chosen point)."""
    predicted, truth = np.asarray(scores) >= threshold, np.asarray(truth, bool)
    hits = int(np.sum(predicted & truth))
    return {
        "precision": hits / int(predicted.sum()) if predicted.any() else None,
        "recall": hits / int(truth.sum()) if truth.any() else None,
    }


def choose_operating_point(ctx: RunContext) -> None:
    """The stage: fixes ctx.operating_point (metrics.json's block) and the decisions the export
    stores (a binary model's threshold, a multi-label model's per label: the task's
    OperatingPoint.choose), before the final metrics are computed and logged
    (results.summarize): they are those of these decisions."""
    from trainer.training.results import export_temperature

    target = target_of(ctx.config.output)
    if target is None:
        return
    temperature = export_temperature(ctx)
    scores = {
        name: ctx.task.operating_point.decision_scores(*ctx.outputs[name], temperature)
        for name in ("validation", "test")
        if name in ctx.outputs
    }
    ctx.operating_point = ctx.task.operating_point.choose(
        lambda column, what: _point(ctx, scores, column, *target, what), *target, ctx.datasets.labels.names, temperature
    )


def _point(ctx: RunContext, scores: dict, column: int, target: str, value: float, what: str) -> dict:
    """The threshold of decision `column` (OperatingPoint.decision_scores) on validation, and its test
    rates."""
    validation_scores, truth = scores["validation"]
    chosen = choose_threshold(validation_scores[:, column], truth[:, column], target, value)
    point = {
        "reached": chosen["reached"],
        "threshold": chosen["threshold"],
        "validation": {"precision": chosen["precision"], "recall": chosen["recall"]},
    }
    if chosen["reached"]:
        log.info(
            "operating point: %s threshold %.4f (validation precision %.4f, recall %.4f; "
            "--target-%s %g): the export and the metrics below decide there",
            what,
            chosen["threshold"],
            chosen["precision"],
            chosen["recall"],
            target,
            value,
        )
        if "test" in scores:
            test_scores, test_truth = scores["test"]
            point["test"] = rates_at(test_scores[:, column], test_truth[:, column], chosen["threshold"])
    else:
        point["why"] = chosen["why"]
        log.warning(
            "operating point: --target-%s %g is out of reach for %s on validation (%s); it keeps %s",
            target,
            value,
            what,
            chosen["why"],
            ctx.task.operating_point.kept_decision(column),
        )
    return point
