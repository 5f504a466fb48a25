"""Texts in, explanations out: what trainer.explain, trainer.serve and the report call.

A loaded export (trainer.serving.export.load_module) predicts each text first, which picks
what to explain: the predicted class (or the one asked for), each predicted label of a
multi-label model (its most probable one when none reaches its threshold), or the score. Its
`explain_tokens` then integrates the path of every (text, target) in batches of rows of one
padding-ladder length, the rows and the path's points split over calls of about two seconds
(trainer.explaining.pacing: Ctrl-C waits for the running call). The rows whose attributions
do not add up (TOLERANCE) are integrated again with more steps. Under a time budget (the
report's) the texts go one at a time in the caller's order, each only while it fits.
"""

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from trainer import progress
from trainer.errors import UserError
from trainer.explaining import integrated_gradients as ig
from trainer.explaining import pacing
from trainer.explaining import words as words_lib
from trainer.inference import loaded_model

TOLERANCE = 0.05  # the completeness the issue asks of 95% of rows: within 5% of the change
MAX_STEPS_FACTOR = 8  # steps are doubled for a row that misses it, up to 8x the asked steps


@dataclasses.dataclass
class Explanation:
    """The attributions of one output of one text."""

    target: str | None  # the explained class or label; None for a score
    output: float  # the explained output on the text: the target's log-odds, or the score
    baseline_output: float  # the same on the baseline (the text's words all padding)
    words: list[words_lib.Word]
    steps: int  # the trapezoid rule's intervals it took (more than asked when it had to)

    @property
    def probability(self) -> float | None:
        """The target's probability, as the export returns it (the sigmoid of its log-odds)."""
        return None if self.target is None else float(1 / (1 + np.exp(-self.output)))

    @property
    def completeness_error(self) -> float:
        return float(ig.completeness_error(sum(w.weight for w in self.words), self.output, self.baseline_output))


def explainable(model) -> bool:
    """An export saved with `explain_tokens` (this version's, with a native encoder)."""
    return hasattr(model, "explain_tokens")


def refusal(task, model_dir: str) -> str | None:
    """Why no export of `task`'s kind can be explained (a kind without explanations: a
    tagger), as its one error line, or None: known from the kind alone, so trainer.explain and
    trainer.serve say it before any model loads or predicts."""
    what = f"--model-dir: {model_dir} cannot explain its predictions"
    return task.refusal("explanations", what)


def require_explainable(model, model_dir: str) -> None:
    refused = refusal(loaded_model.task_of(model), model_dir)
    if refused:
        raise UserError(refused)
    if not explainable(model):
        raise UserError(
            f"--model-dir: {model_dir} cannot explain its predictions: it was exported "
            f"before token attributions existed, or with a TF-Hub encoder "
            f"(--encoder-backend hub), whose word embeddings cannot be reached; "
            f"re-export it with this version and a native encoder"
        )


def targets_of(model, texts, pairs, features, batch_size: int, target: str | None = None):
    """[(row, target index or -1 for a score, target name or None)] of every text: what its
    task explains (its explanations part's outputs and choices), chosen as the export chose (a
    binary model's operating point applied, as predict does)."""
    part = loaded_model.task_of(model).explanations
    if not part.outputs:
        return [(row, -1, None) for row in range(len(texts))]
    names, probabilities, chosen = part.choices(
        loaded_model.predict_outputs(model, texts, batch_size, pairs, features, part.outputs)
    )
    if target is not None:
        if target not in names:
            raise UserError(f"--target: {target!r} is not one of the model's labels ({', '.join(names)})")
        return [(row, names.index(target), target) for row in range(len(texts))]
    jobs = []
    for row, (picked, p) in enumerate(zip(chosen, probabilities)):
        indices = np.flatnonzero(picked) if picked.any() else [int(p.argmax())]
        jobs += [(row, int(i), names[int(i)]) for i in indices]
    return jobs


def _integrate(
    model, batch: dict, target: np.ndarray, alphas, weights, pace: pacing.Pace, done: Callable[[float], None]
) -> dict:
    """One batch's attributions [B, T] summed over the path, its outputs at the path's two
    ends, and its pieces, in calls `pace` sizes; `done(share of the batch)` after each call."""
    width, parts, first = batch["input_mask"].shape[1], [], 0
    while first < len(target):
        rows = pace.rows(width, len(target) - first, len(alphas))
        chunk = {k: v[first : first + rows] for k, v in batch.items()}
        total, ends, start, last = 0.0, [], 0, None
        while start < len(alphas):
            points = pace.points(width, rows, len(alphas) - start)
            last = pace.call(
                rows * points * width,
                _call,
                model,
                chunk,
                target[first : first + rows],
                alphas[start : start + points],
                weights[start : start + points],
            )
            total, start = total + last["attributions"], start + points
            ends.append(last["outputs"])
            done((first + rows * start / len(alphas)) / len(target))
        outputs = np.concatenate(ends, axis=1)
        parts.append(
            {
                "attributions": total,
                "output": outputs[:, -1],
                "baseline": outputs[:, 0],
                **{k: last[k] for k in ("pieces", "starts_word", "content")},
            }
        )
        first += rows
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _call(model, chunk: dict, target, alphas, weights) -> dict:
    """One call of the export's explain_tokens, its results as numpy arrays."""
    return {k: v.numpy() for k, v in model.explain_tokens(chunk, target, alphas, weights).items()}


def explain_texts(
    model,
    texts: Sequence[str],
    pairs=None,
    steps: int = 32,
    target: str | None = None,
    batch_size: int = 64,
    max_steps_factor: int = MAX_STEPS_FACTOR,
    log_every_seconds: float = 30.0,
    pace: pacing.Pace | None = None,
) -> list[list[Explanation]]:
    """Per text, its explanations (one per explained target; none for an empty text).

    An explanation whose attributions miss the output's change by more than TOLERANCE is
    integrated again with twice the steps, up to `max_steps_factor` times `steps` (1: never):
    a path on which the output turns sharply needs more points than a smooth one, and most
    need few. Each pass logs a progress line every `log_every_seconds` (a report's 20 rows take
    minutes on a base-sized encoder on a CPU).

    A `pace` with a budget (pacing.Pace) explains the texts one at a time in their order, the
    caller's order of need, first all at `steps`, then those that miss with more: each only
    when its estimate fits in what is left. A (text, target) it never reached is left out of
    the result and listed in `pace.left_out`; one it could not integrate again keeps its
    fewer steps (Explanation.steps)."""
    texts, pace = list(texts), pace or pacing.Pace()
    features = loaded_model.tokenize(model, texts, pairs)
    empty = loaded_model.empty_rows(texts, pairs)
    jobs = [job for job in targets_of(model, texts, pairs, features, batch_size, target) if not empty[job[0]]]
    meter = lambda what, total: progress.Progress(what, log_every_seconds, total=total)  # noqa: E731
    explained = _explain_jobs(model, features, jobs, steps, meter(f"explained ({steps} steps)", len(jobs)), pace)
    for more in (steps * 2**n for n in range(1, max_steps_factor.bit_length())):
        redo = [i for i, e in enumerate(explained) if e is not None and e.completeness_error > TOLERANCE]
        if not redo:
            break
        again = meter(f"explained again ({more} steps)", len(redo))
        for i, e in zip(redo, _explain_jobs(model, features, [jobs[i] for i in redo], more, again, pace)):
            explained[i] = e or explained[i]
    pace.left_out = [(row, name) for (row, _, name), e in zip(jobs, explained) if e is None]
    result: list[list[Explanation]] = [[] for _ in texts]
    for (row, _, _), explanation in zip(jobs, explained):
        if explanation is not None:
            result[row].append(explanation)
    return result


def _batches(model, features: dict, count: int, one_at_a_time: bool):
    """(indices, features) batches of `features`' `count` rows: of one padding-ladder length
    each, or one row each in order."""
    ladder = loaded_model.ladder_of(model)
    if not one_at_a_time:
        yield from loaded_model.token_batches(features, count, ladder)
        return
    for i in range(count):
        for _, batch in loaded_model.token_batches({k: v[i : i + 1] for k, v in features.items()}, 1, ladder):
            yield np.asarray([i]), batch


def _explain_jobs(
    model, features: dict, jobs: list, steps: int, meter: progress.Progress, pace: pacing.Pace
) -> list[Explanation | None]:
    """The Explanation of each (row, target index, target name) of `jobs`, in order; None for
    one that `pace`'s budget had no time left for."""
    explained: list[Explanation | None] = [None] * len(jobs)
    if not jobs:
        return explained
    alphas, weights = ig.trapezoid(steps)
    rows, done = np.asarray([row for row, _, _ in jobs], np.int64), 0
    chosen = {k: v[rows] for k, v in features.items()}
    for indices, batch in _batches(model, chosen, len(jobs), pace.budget is not None):
        if pace.fits(len(indices) * len(alphas) * batch["input_mask"].shape[1]):
            size = len(indices)
            out = _integrate(
                model,
                batch,
                np.asarray([max(jobs[i][1], 0) for i in indices], np.int32),
                alphas,
                weights,
                pace,
                lambda part, done=done, size=size: meter.update(done, (done + part * size) / len(jobs)),
            )
            for n, i in enumerate(indices):
                merged = words_lib.merge(
                    out["pieces"][n], out["starts_word"][n], out["content"][n], out["attributions"][n]
                )
                explained[i] = Explanation(
                    jobs[i][2], float(out["output"][n]), float(out["baseline"][n]), merged, steps
                )
        done += len(indices)
        meter.update(done)
    return explained
