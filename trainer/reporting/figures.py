"""The report's figures, each rendered to PNG bytes with matplotlib's Agg canvas.

Figures are built as `matplotlib.figure.Figure` objects on an Agg canvas, never through pyplot's
global state, so building a report inside another program (a notebook, the training run) neither
opens windows nor touches that program's own figures.
"""

import io
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sklearn.metrics import ConfusionMatrixDisplay

from trainer.reporting import calibration

DPI = 100


def new_figure(width: float, height: float, columns: int):
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots(1, columns, squeeze=False)[0]


def to_png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def learning_curves(history, best_epoch, metric: str, loss_name: str = "cross-entropy", by_step: bool = False) -> bytes:
    """Train and validation loss, and the metric selecting the best epoch, per epoch; or, with
    `by_step` (--eval-every-steps: an "epoch" is then a span of steps), per evaluation against
    the optimizer step.

    `history` is eval_history.csv as a DataFrame; `metric` a column of it (val_macro_f1, ...);
    `loss_name` the task's loss in words.
    """
    figure, (loss_ax, metric_ax) = new_figure(10, 4, 2)
    x, unit = (history["step"], "step") if by_step else (history["epoch"], "epoch")
    loss_ax.plot(x, history["loss"], "o-", label="train")
    loss_ax.plot(x, history["val_loss"], "o-", label="validation")
    loss_ax.set(title="Loss", xlabel=unit, ylabel=loss_name)
    metric_ax.plot(x, history[metric], "o-", color="tab:green", label="validation")
    metric_ax.set(title=f"Selection metric: {metric}", xlabel=unit, ylabel=metric)
    best = None
    if best_epoch is not None:
        best = history.loc[history["epoch"] == best_epoch, "step"].iloc[0] if by_step else best_epoch
    for ax in (loss_ax, metric_ax):
        if best is not None:
            ax.axvline(best, color="gray", linestyle="--", label=f"best {unit} ({best})")
        ax.set_xticks(list(x))
        ax.grid(alpha=0.3)
        ax.legend()
    return to_png(figure)


def confusion_matrices(matrix: Sequence[Sequence[int]], label_names: Sequence[str], split: str) -> bytes:
    """Counts, and each true class's row normalized to sum 1 (its recall on the diagonal)."""
    counts = np.asarray(matrix, dtype=np.int64)
    rows = counts.sum(axis=1, keepdims=True)
    normalized = np.divide(counts, rows, out=np.zeros(counts.shape), where=rows > 0)
    size = 3.2 + 0.45 * len(label_names)
    figure, (count_ax, norm_ax) = new_figure(2 * size + 1, size, 2)
    rotation = 45 if len(label_names) > 4 else 0
    ConfusionMatrixDisplay(counts, display_labels=label_names).plot(
        ax=count_ax, cmap="Blues", values_format="d", colorbar=False, xticks_rotation=rotation
    )
    ConfusionMatrixDisplay(normalized, display_labels=label_names).plot(
        ax=norm_ax,
        cmap="Blues",
        values_format=".2f",
        colorbar=False,
        xticks_rotation=rotation,
        im_kw={"vmin": 0.0, "vmax": 1.0},
    )
    count_ax.set_title(f"{split}: counts")
    norm_ax.set_title(f"{split}: share of each true class")
    return to_png(figure)


def per_class_scores(
    per_class_by_split: Mapping[str, Mapping[str, dict]], label_names: Sequence[str], what: str = "class"
) -> bytes:
    """Grouped precision / recall / F1 bars per class (or per label: `what`), one panel per split."""
    width = max(5.0, 1.0 + 0.9 * len(label_names))
    figure, axes = new_figure(width * len(per_class_by_split), 4, len(per_class_by_split))
    x = np.arange(len(label_names))
    for ax, (split, per_class) in zip(axes, per_class_by_split.items()):
        for offset, score in zip((-0.27, 0.0, 0.27), ("precision", "recall", "f1")):
            ax.bar(x + offset, [per_class[name][score] for name in label_names], 0.27, label=score)
        ax.set_xticks(x, label_names, rotation=45 if len(label_names) > 4 else 0)
        ax.set(title=f"{split}: per-{what} scores", ylim=(0, 1.2), yticks=np.linspace(0, 1, 6))
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper center", ncol=3, fontsize="small")
    return to_png(figure)


def reliability_diagram(
    before: np.ndarray, after: np.ndarray, labels: np.ndarray, split: str, temperature: float
) -> bytes:
    """Accuracy against confidence per bin, before and after temperature scaling."""
    figure, axes = new_figure(10, 4.5, 2)
    edges = np.linspace(0, 1, calibration.BINS + 1)
    for ax, probabilities, title in (
        (axes[0], before, "before calibration (T = 1)"),
        (axes[1], after, f"after calibration (T = {temperature:.3g})"),
    ):
        accuracy, confidence, count = calibration.reliability_bins(probabilities, labels)
        ece = calibration.expected_calibration_error(probabilities, labels)
        filled = count > 0
        ax.bar(
            edges[:-1][filled],
            accuracy[filled],
            width=1 / calibration.BINS,
            align="edge",
            edgecolor="black",
            alpha=0.7,
            label="accuracy",
        )
        ax.plot(confidence[filled], accuracy[filled], "o", color="tab:red", label="bin (mean confidence, accuracy)")
        ax.plot([0, 1], [0, 1], "--", color="gray", label="perfect calibration")
        ax.set(
            title=f"{split}, {title}\nECE {ece:.3f}",
            xlabel="confidence (top probability)",
            ylabel="accuracy",
            xlim=(0, 1),
            ylim=(0, 1.02),
        )
        ax.legend(loc="upper left", fontsize="small")
    return to_png(figure)


def predicted_vs_true(by_split: Mapping[str, tuple]) -> bytes:
    """A regression model's predicted score against the true one, one panel per split, with the
    line y = x where every prediction would be exact. `by_split`: {split: (true, predicted)}."""
    figure, axes = new_figure(5.0 * len(by_split), 5.0, len(by_split))
    for ax, (split, (true, predicted)) in zip(axes, by_split.items()):
        low = float(min(np.min(true), np.min(predicted)))
        high = float(max(np.max(true), np.max(predicted)))
        margin = 0.05 * (high - low or 1.0)
        ax.scatter(true, predicted, s=14, alpha=0.6, label="example")
        ax.plot([low - margin, high + margin], [low - margin, high + margin], "--", color="gray", label="y = x (exact)")
        ax.set(
            title=f"{split}: predicted against true",
            xlabel="true score",
            ylabel="predicted score",
            xlim=(low - margin, high + margin),
            ylim=(low - margin, high + margin),
        )
        ax.set_box_aspect(1)  # equal limits in a square box: one unit is as long on both axes
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
    return to_png(figure)


def residual_histograms(by_split: Mapping[str, tuple]) -> bytes:
    """Histograms of predicted - true score, one panel per split; `by_split` as predicted_vs_true."""
    figure, axes = new_figure(5.0 * len(by_split), 4.0, len(by_split))
    for ax, (split, (true, predicted)) in zip(axes, by_split.items()):
        residuals = np.asarray(predicted, np.float64) - np.asarray(true, np.float64)
        ax.hist(residuals, bins=int(np.clip(np.sqrt(len(residuals)) * 2, 5, 40)), edgecolor="black", alpha=0.7)
        ax.axvline(0.0, color="gray", linestyle="--", label="exact")
        ax.axvline(float(residuals.mean()), color="tab:red", label=f"mean {residuals.mean():+.3g}")
        ax.set(title=f"{split}: residuals", xlabel="predicted - true score", ylabel="examples")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper right", fontsize="small")
    return to_png(figure)


def cosine_histograms(by_split: Mapping[str, tuple]) -> bytes:
    """Histograms of an embedding model's pair cosines, one panel per split, its pairs cut at the
    split's median score: the more similar half against the less similar one. `by_split`:
    {split: (scores, cosines)}."""
    halves = {}
    for split, (scores, cosines) in by_split.items():
        scores, cosines = np.asarray(scores, np.float64), np.asarray(cosines, np.float64)
        above = scores > np.median(scores)
        halves[split] = {"score above the median": cosines[above], "score at or below it": cosines[~above]}
    return histograms(halves, "cosine of each pair", "pairs")


def histograms(by_split: Mapping[str, dict], title: str, ylabel: str) -> bytes:
    """One panel per split of overlaid cosine histograms, one per named group of values (NaN
    left out), on shared bins; each group's legend counts its values. `by_split`: {split:
    {group name: values}}."""
    figure, axes = new_figure(5.0 * len(by_split), 4.0, len(by_split))
    for ax, (split, groups) in zip(axes, by_split.items()):
        groups = {name: np.asarray(values, np.float64) for name, values in groups.items()}
        groups = {name: values[np.isfinite(values)] for name, values in groups.items()}
        every = np.concatenate(list(groups.values()))
        bins = np.linspace(float(every.min()), float(every.max()) + 1e-9, int(np.clip(np.sqrt(len(every)) * 2, 5, 40)))
        for name, values in groups.items():
            ax.hist(values, bins=bins, alpha=0.6, label=f"{name} ({len(values)})")
        ax.set(title=f"{split}: {title}", xlabel="cosine", ylabel=ylabel)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
    return to_png(figure)
