"""report.html's precision-recall curve on validation with the chosen operating point
(--target-precision/--target-recall: trainer.training.operating_point) marked, one curve per
decision the task names (its operating point part's curves), noted with the task's words for the point."""

import numpy as np

from trainer.reporting.figures import new_figure, to_png


def figures(metrics: dict, predictions, task) -> list:
    """[(file name, title, png bytes, note)]: the curve when the run chose an operating point."""
    point = metrics.get("operating_point")
    if not point or "validation" not in predictions:
        return []
    curves = task.operating_point.curves(point, predictions["validation"], metrics["labels"])
    note = (
        f"{task.operating_point.describe(point, metrics['labels'])} trainer.predict and trainer.serve decide there. "
        f"The curve: validation precision against recall as the threshold moves; the dot is the "
        f"chosen threshold. A curve without a dot could not reach the target and keeps its usual "
        f"decision."
    )
    return [
        (
            "precision_recall.png",
            "Precision-recall curve: validation",
            precision_recall(curves, point["target"], point["value"]),
            note,
        )
    ]


def precision_recall(curves, target: str, value: float) -> bytes:
    """`curves`: [(name, scores, truth, point)] where point holds `reached`, `threshold` and
    its validation precision/recall; the target drawn as a dashed line."""
    from sklearn.metrics import precision_recall_curve

    figure, (ax,) = new_figure(6.5, 5, 1)
    for name, scores, truth, point in curves:
        if not np.any(truth):
            continue
        precision, recall, _ = precision_recall_curve(truth, np.asarray(scores, np.float64))
        (line,) = ax.plot(recall, precision, label=str(name), drawstyle="steps-post")
        if point["reached"]:
            chosen = point["validation"]
            ax.plot(
                chosen["recall"],
                chosen["precision"],
                "o",
                color=line.get_color(),
                markersize=9,
                label=f"{name}: threshold {point['threshold']:.3f}",
            )
    if target == "precision":
        ax.axhline(value, color="gray", linestyle="--", label=f"target precision {value:g}")
    else:
        ax.axvline(value, color="gray", linestyle="--", label=f"target recall {value:g}")
    ax.set(xlabel="recall", ylabel="precision", xlim=(0, 1.02), ylim=(0, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")
    return to_png(figure)
