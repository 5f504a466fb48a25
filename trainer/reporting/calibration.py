"""Temperature scaling: does "90% sure" mean right 90% of the time?

Fine-tuned classifiers are usually over-confident. Temperature scaling (Guo et al., "On
Calibration of Modern Neural Networks", 2017) divides every logit by one scalar T fitted on the
validation set; T > 1 softens the probabilities, T < 1 sharpens them, and the argmax (the
predicted label) never changes.

The metrics.json block `calibration_block` returns:
    temperature   the fitted T (validation log loss minimized over [MIN_T, MAX_T])
    at_bound      T hit MIN_T or MAX_T: typically a validation set classified (almost)
                  perfectly, whose log loss keeps falling as probabilities sharpen; such a T
                  says little about new data, and is never applied
    applied       whether the exported model divides its logits by it (`decide`): --calibrate
                  on, T inside its search range, and T lowers both the validation log loss and
                  the validation ECE
    why           the reason, one phrase: what the log, the report and the model card say

Why a T at its bound is not applied (rather than fitted some other way): the log loss then has
no minimum in the range, only a slope that runs into the bound, so the bound is an artefact of
the search, not a measurement. On a validation set classified perfectly the slope always points
to T -> 0, and T = 0.05 would turn every prediction into 0 or 1 ("The sky is blue." neutral
1.0); a bounded or regularised fit would still pick a T the data cannot support, set by the
prior instead of the bound. Exporting T = 1 keeps the model's own probabilities, which is the
honest answer when validation cannot say how confident the model should be.

Why a T that raises the validation ECE is not applied either: T minimizes the validation log
loss, and ECE, the figure every output shows for calibration, can get worse on that very set
(issue #49: 0.048 -> 0.077 on an MRPC run; the sample posts' --dry-run fits T = 0.357, which
takes it from 0.062 to 0.193). An export kept at a T that its own run measures as worse
calibrated contradicts the report, so T is kept only when it lowers both. What that costs on
real models (ECE on a few hundred rows is noisy, and a refused T often helped on unseen rows) is
measured in docs/outputs.md, "Calibration" (bench/calibration.py).
    bins          equal-width confidence bins of the expected calibration error (15)
    validation, test (when a test set exists), each:
        ece_before, ece_after       expected calibration error with T = 1 and with T
        brier_before, brier_after   multi-class Brier score: mean over examples of
                                    sum over classes of (p - onehot)^2, in [0, 2]
        nll_before, nll_after       mean negative log-likelihood (the loss T minimizes)
"""

from collections.abc import Mapping

import numpy as np
from scipy import optimize

from trainer.tasks.parts.temperature import softmax, softmax_cross_entropy

BINS = 15
MIN_T, MAX_T = 0.05, 20.0


def negative_log_likelihood(logits: np.ndarray, labels: np.ndarray, temperature: float = 1.0) -> float:
    return float(softmax_cross_entropy(np.asarray(logits, np.float64) / temperature, labels).mean())


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The T in [MIN_T, MAX_T] minimizing the mean NLL of softmax(logits / T).

    The NLL is convex in 1/T, so it has one minimum along log T too: a bounded Brent search
    over log T finds it without a starting guess or gradients. A bound is the answer when the
    minimum lies beyond it (`at_bound` in calibration_block).
    """

    def nll(t):
        return negative_log_likelihood(logits, labels, t)

    result = optimize.minimize_scalar(
        lambda log_t: nll(float(np.exp(log_t))),
        method="bounded",
        bounds=(np.log(MIN_T), np.log(MAX_T)),
        options={"xatol": 1e-6},
    )
    # Where the loss is flat (every example right by a wide margin: it rounds to 0 near the
    # lower bound) Brent stops anywhere in the flat part; a bound as good as that is the answer.
    return min([MIN_T, MAX_T, float(np.exp(result.x))], key=nll)


def is_at_bound(temperature: float) -> bool:
    """T within 0.1% of MIN_T or MAX_T: the search stopped at its edge, not at a minimum."""
    return not MIN_T * 1.001 < temperature < MAX_T / 1.001


def reliability_bins(
    probabilities: np.ndarray, labels: np.ndarray, bins: int = BINS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(accuracy, mean confidence, count) per equal-width bin of the top probability.

    Bin i holds confidences in (i/bins, (i+1)/bins]; an empty bin has accuracy and confidence 0.
    """
    confidence = probabilities.max(axis=1)
    correct = (probabilities.argmax(axis=1) == labels).astype(np.float64)
    index = np.clip(np.ceil(confidence * bins).astype(int) - 1, 0, bins - 1)
    count = np.bincount(index, minlength=bins)
    safe = np.maximum(count, 1)
    accuracy = np.bincount(index, weights=correct, minlength=bins) / safe
    mean_confidence = np.bincount(index, weights=confidence, minlength=bins) / safe
    return accuracy, mean_confidence, count


def expected_calibration_error(probabilities: np.ndarray, labels: np.ndarray, bins: int = BINS) -> float:
    """Sum over bins of (bin size / N) * |accuracy - mean confidence|."""
    accuracy, confidence, count = reliability_bins(probabilities, labels, bins)
    return float((count * np.abs(accuracy - confidence)).sum() / max(count.sum(), 1))


def brier_score(probabilities: np.ndarray, labels: np.ndarray) -> float:
    onehot = np.eye(probabilities.shape[1])[labels]
    return float(((probabilities - onehot) ** 2).sum(axis=1).mean())


def split_scores(logits: np.ndarray, labels: np.ndarray, temperature: float) -> dict:
    before, after = softmax(logits), softmax(logits, temperature)
    return {
        "ece_before": expected_calibration_error(before, labels),
        "ece_after": expected_calibration_error(after, labels),
        "brier_before": brier_score(before, labels),
        "brier_after": brier_score(after, labels),
        "nll_before": negative_log_likelihood(logits, labels),
        "nll_after": negative_log_likelihood(logits, labels, temperature),
    }


def calibration_block(splits: Mapping[str, tuple[np.ndarray, np.ndarray]], applied: bool) -> dict:
    """metrics.json's "calibration" from {"validation": (logits, labels), "test": ...}.

    T is fitted on the validation split. `applied`: whether the run asks for it (--calibrate
    on); the block's own `applied` says whether the export divides by it (`decide`).
    """
    temperature = fit_temperature(*splits["validation"])
    scores = {name: split_scores(*splits[name], temperature) for name in ("validation", "test") if name in splits}
    at_bound = is_at_bound(temperature)
    kept, why = decide(scores["validation"], at_bound, bool(applied))
    return {"temperature": temperature, "at_bound": at_bound, "applied": kept, "why": why, "bins": BINS, **scores}


def decide(validation: dict, at_bound: bool, wanted: bool) -> tuple[bool, str]:
    """(apply T?, why): only when asked for, inside its search range, and lowering both the
    validation log loss it was fitted on and the validation ECE the outputs judge it by."""
    if not wanted:
        return False, "--calibrate off"
    if at_bound:
        return False, "T is at its search bound, which validation cannot support"
    if not validation["ece_after"] < validation["ece_before"]:
        return False, (
            "it raises the validation ECE"
            if validation["ece_after"] > validation["ece_before"]
            else "it leaves the validation ECE as it is"
        )
    if not validation["nll_after"] < validation["nll_before"]:
        return False, "it does not lower the validation log loss"
    return True, "it lowers the validation log loss and ECE"
