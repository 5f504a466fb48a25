"""Texts in, explanations out: what trainer.explain, trainer.serve and the report call.

A loaded export (trainer.serving.export.load_module) predicts each text first, which picks
what to explain: the predicted class (or the one asked for), each predicted label of a
multi-label model (its most probable one when none reaches its threshold), or the score. Its
`explain_tokens` then integrates the path of every (text, target) in batches of rows of one
padding-ladder length, the path's points split over calls so that no call holds more than
TOKENS_PER_CALL tokens (a step's activations and gradients are kept for each of them). The
rows whose attributions do not add up (TOLERANCE) are integrated again with more steps.
"""
import dataclasses
from typing import List, Optional, Sequence

import numpy as np

from trainer import progress
from trainer.errors import UserError
from trainer.explaining import integrated_gradients as ig, words as words_lib
from trainer.serving import predict

TOKENS_PER_CALL = 16_384
TOLERANCE = 0.05  # the completeness the issue asks of 95% of rows: within 5% of the change
MAX_STEPS_FACTOR = 8  # steps are doubled for a row that misses it, up to 8x the asked steps


@dataclasses.dataclass
class Explanation:
    """The attributions of one output of one text."""
    target: Optional[str]  # the explained class or label; None for a score
    output: float  # the explained output on the text: the target's log-odds, or the score
    baseline_output: float  # the same on the baseline (the text's words all padding)
    words: List[words_lib.Word]
    steps: int  # the trapezoid rule's intervals it took (more than asked when it had to)

    @property
    def probability(self) -> Optional[float]:
        """The target's probability, as the export returns it (the sigmoid of its log-odds)."""
        return None if self.target is None else float(1 / (1 + np.exp(-self.output)))

    @property
    def completeness_error(self) -> float:
        return float(ig.completeness_error(sum(w.weight for w in self.words), self.output,
                                           self.baseline_output))


def explainable(model) -> bool:
    """An export saved with `explain_tokens` (this version's, with a native encoder)."""
    return hasattr(model, "explain_tokens")


def require_explainable(model, model_dir: str) -> None:
    if not explainable(model):
        raise UserError(f"--model-dir: {model_dir} cannot explain its predictions: it was exported "
                        f"before token attributions existed, or with a TF-Hub encoder "
                        f"(--encoder-backend hub), whose word embeddings cannot be reached; "
                        f"re-export it with this version and a native encoder")


def targets_of(model, texts, pairs, features, batch_size: int, target: Optional[str] = None):
    """[(row, target index or -1 for a score, target name or None)] of every text."""
    if predict.is_regression(model):
        return [(row, -1, None) for row in range(len(texts))]
    if predict.is_multilabel(model):
        probabilities, names, _, chosen = predict.predict_label_sets(model, texts, batch_size, pairs, features)
    else:
        # the class the export chose: a binary model's operating point applied, as predict does
        probabilities, names, predicted = predict.predict_classes(model, texts, batch_size, pairs, features)
        chosen = np.eye(len(names), dtype=bool)[predicted]
    if target is not None:
        if target not in names:
            raise UserError(f"--target: {target!r} is not one of the model's labels "
                            f"({', '.join(names)})")
        return [(row, names.index(target), target) for row in range(len(texts))]
    jobs = []
    for row, (picked, p) in enumerate(zip(chosen, probabilities)):
        indices = np.flatnonzero(picked) if picked.any() else [int(p.argmax())]
        jobs += [(row, int(i), names[int(i)]) for i in indices]
    return jobs


def _calls(width: int, rows: int, steps: int):
    """(rows per call, points per call) within TOKENS_PER_CALL tokens."""
    points = min(steps + 1, max(1, TOKENS_PER_CALL // width))
    return max(1, min(rows, TOKENS_PER_CALL // (points * width))), points


def _integrate(model, batch: dict, target: np.ndarray, alphas, weights) -> dict:
    """One batch's attributions [B, T] summed over the path, its outputs at the path's two
    ends, and its pieces, in as many calls as TOKENS_PER_CALL needs."""
    rows, points = _calls(batch["input_mask"].shape[1], len(target), len(alphas) - 1)
    parts = []
    for first in range(0, len(target), rows):
        chunk = {k: v[first:first + rows] for k, v in batch.items()}
        total, ends, last = 0.0, [], None
        for start in range(0, len(alphas), points):
            last = model.explain_tokens(chunk, target[first:first + rows], alphas[start:start + points],
                                        weights[start:start + points])
            total = total + last["attributions"].numpy()
            ends.append(last["outputs"].numpy())
        outputs = np.concatenate(ends, axis=1)
        parts.append({"attributions": total, "output": outputs[:, -1], "baseline": outputs[:, 0],
                      **{k: last[k].numpy() for k in ("pieces", "starts_word", "content")}})
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def explain_texts(model, texts: Sequence[str], pairs=None, steps: int = 32,
                  target: Optional[str] = None, batch_size: int = 64,
                  max_steps_factor: int = MAX_STEPS_FACTOR,
                  log_every_seconds: float = 30.0) -> List[List[Explanation]]:
    """Per text, its explanations (one per explained target; none for an empty text).

    An explanation whose attributions miss the output's change by more than TOLERANCE is
    integrated again with twice the steps, up to `max_steps_factor` times `steps` (1: never):
    a path on which the output turns sharply needs more points than a smooth one, and most
    need few. Each pass logs a progress line every `log_every_seconds` (a report's 20 rows take
    minutes on a base-sized encoder on a CPU)."""
    texts = list(texts)
    features = predict.tokenize(model, texts, pairs)
    empty = predict.empty_rows(texts, pairs)
    jobs = [job for job in targets_of(model, texts, pairs, features, batch_size, target)
            if not empty[job[0]]]
    meter = lambda what, total: progress.Progress(what, log_every_seconds, total=total)  # noqa: E731
    explained = _explain_jobs(model, features, jobs, steps, meter(f"explained ({steps} steps)", len(jobs)))
    for more in (steps * 2 ** n for n in range(1, max_steps_factor.bit_length())):
        redo = [i for i, e in enumerate(explained) if e.completeness_error > TOLERANCE]
        if not redo:
            break
        again = meter(f"explained again ({more} steps)", len(redo))
        for i, e in zip(redo, _explain_jobs(model, features, [jobs[i] for i in redo], more, again)):
            explained[i] = e
    result: List[List[Explanation]] = [[] for _ in texts]
    for (row, _, _), explanation in zip(jobs, explained):
        result[row].append(explanation)
    return result


def _explain_jobs(model, features: dict, jobs: list, steps: int,
                  meter: progress.Progress) -> List[Explanation]:
    """The Explanation of each (row, target index, target name) of `jobs`, in order."""
    explained: List[Optional[Explanation]] = [None] * len(jobs)
    if not jobs:
        return []
    alphas, weights = ig.trapezoid(steps)
    rows, done = np.asarray([row for row, _, _ in jobs], np.int64), 0
    for indices, batch in predict._token_batches({k: v[rows] for k, v in features.items()}, len(jobs),
                                                     predict.ladder_of(model)):
        out = _integrate(model, batch, np.asarray([max(jobs[i][1], 0) for i in indices], np.int32),
                         alphas, weights)
        for n, i in enumerate(indices):
            merged = words_lib.merge(out["pieces"][n], out["starts_word"][n], out["content"][n],
                                     out["attributions"][n])
            explained[i] = Explanation(jobs[i][2], float(out["output"][n]), float(out["baseline"][n]),
                                       merged, steps)
        done += len(indices)
        meter.update(done)
    return explained
