"""report.html's precision-recall curve on validation with the chosen operating point marked
(--target-precision/--target-recall: trainer.training.operating_point). One curve for a binary
classifier's positive class, one per label for a multi-label model."""
import numpy as np

from trainer.reporting.figures import _figure, _png


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
    wanted = f"--target-{point['target']} {point['value']:g}"
    note = (f"Validation precision against recall as the threshold moves; the dot is the threshold "
            f"chosen for {wanted}, which the export applies (predict and serve decide there). "
            f"A curve without a dot could not reach the target and keeps its usual decision.")
    return [("precision_recall.png", "Precision-recall curve: validation",
             precision_recall(curves, point["target"], point["value"]), note)]


def precision_recall(curves, target: str, value: float) -> bytes:
    """`curves`: [(name, scores, truth, point)] where point holds `reached`, `threshold` and
    its validation precision/recall; the target drawn as a dashed line."""
    from sklearn.metrics import precision_recall_curve

    figure, (ax,) = _figure(6.5, 5, 1)
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
    return _png(figure)
