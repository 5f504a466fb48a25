"""The chosen operating point (--target-precision/--target-recall:
trainer.training.operating_point) in words, for the model card and report.html, and
report.html's precision-recall curve on validation with that point marked. One curve for a
binary classifier's positive class, one per label for a multi-label model."""
import json

import numpy as np

from trainer.reporting.figures import new_figure, to_png


def describe(point: dict, labels) -> str:
    """What the exported model decides, in one or two sentences naming the threshold, from
    metrics.json's `operating_point` block (not None) and `labels`."""
    wanted = (f"{point['target']} >= {point['value']:g} (--target-{point['target']} "
              f"{point['value']:g})")
    if "labels" in point:  # multi-label
        missed = [f"{json.dumps(name)} ({p['why']})" for name, p in point["labels"].items()
                  if not p["reached"]]
        return (f"Each label is predicted when its probability reaches its threshold, chosen on "
                f"validation for {wanted}" + (f"; out of reach there, these keep their F1-chosen "
                f"threshold: {', '.join(missed)}" if missed else "") + ".")
    positive, negative = json.dumps(point["positive_label"]), json.dumps(labels[0])
    if not point["reached"]:
        return (f"--target-{point['target']} {point['value']:g} was out of reach on validation "
                f"({point['why']}), so the model predicts the more probable label: {positive} "
                f"when its probability is at least 0.5, otherwise {negative}.")
    test = point.get("test")
    return (f"The model predicts {positive} when its probability of {positive} is at least "
            f"{point['threshold']:.3f}, otherwise {negative}: a threshold chosen on validation for "
            f"{wanted}, where it reaches precision {_rate(point['validation']['precision'])} and "
            f"recall {_rate(point['validation']['recall'])}"
            + (f" (test: precision {_rate(test['precision'])}, recall {_rate(test['recall'])})"
               if test else "") + ".")


def _rate(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def figures(metrics: dict, predictions) -> list:
    """[(file name, title, png bytes, note)]: the curve when the run chose an operating point."""
    point = metrics.get("operating_point")
    if not point or "validation" not in predictions:
        return []
    p = predictions["validation"]
    if "labels" in point:  # multi-label: one curve per label
        curves = [(name, p.probabilities[:, j], np.asarray(p.labels)[:, j] > 0.5, point["labels"][name])
                  for j, name in enumerate(metrics["labels"])]
    else:
        curves = [(point["positive_label"], p.probabilities[:, 1], np.asarray(p.labels) == 1, point)]
    note = (f"{describe(point, metrics['labels'])} trainer.predict and trainer.serve decide there. "
            f"The curve: validation precision against recall as the threshold moves; the dot is the "
            f"chosen threshold. A curve without a dot could not reach the target and keeps its usual "
            f"decision.")
    return [("precision_recall.png", "Precision-recall curve: validation",
             precision_recall(curves, point["target"], point["value"]), note)]


def precision_recall(curves, target: str, value: float) -> bytes:
    """`curves`: [(name, scores, truth, point)] where point holds `reached`, `threshold` and
    its validation precision/recall; the target drawn as a dashed line."""
    from sklearn.metrics import precision_recall_curve

    figure, (ax,) = new_figure(6.5, 5, 1)
    for name, scores, truth, point in curves:
        if not np.any(truth):
            continue
        precision, recall, _ = precision_recall_curve(truth, np.asarray(scores, np.float64))
        line, = ax.plot(recall, precision, label=str(name), drawstyle="steps-post")
        if point["reached"]:
            chosen = point["validation"]
            ax.plot(chosen["recall"], chosen["precision"], "o", color=line.get_color(), markersize=9,
                    label=f"{name}: threshold {point['threshold']:.3f}")
    if target == "precision":
        ax.axhline(value, color="gray", linestyle="--", label=f"target precision {value:g}")
    else:
        ax.axvline(value, color="gray", linestyle="--", label=f"target recall {value:g}")
    ax.set(xlabel="recall", ylabel="precision", xlim=(0, 1.02), ylim=(0, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")
    return to_png(figure)
