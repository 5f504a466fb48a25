"""Words coloured by their attributions: report.html's section and trainer.explain's page.

A word's background is red where it pushed the explained output up and blue where it pulled
it down, its opacity its share of the text's largest attribution (by absolute value): each
text is scaled on its own, so a reader compares the words of one text, not texts. The
numbers are in each word's tooltip.

The report explains, with the exported model (trainer.explaining.attribute), up to half of
--report-explanations rows from its worst errors and the rest from a seeded sample of the other
rows of the test split (validation when there is no test split): a sample of correct
predictions, and for regression, where no row is simply right, of the rest. The rows are shown
in the texts' own words (trainer.explaining.words.in_texts), not the tokenizer's pieces.

Explaining has a time budget, a tenth of the run's training time (budget_seconds): a base-sized
encoder on a CPU explains a row in seconds to a minute, and after a 30-minute run 20 rows once
took over 10 minutes. The rows are explained in order of need, an error and a sampled row in
turn, each only while its estimated time fits; the section lists the rows the budget left
out, and those that do not add up and why.
"""

import itertools
import logging
import time
from collections.abc import Mapping, Sequence

import jinja2
import markupsafe
import numpy as np

from trainer import progress
from trainer.explaining import integrated_gradients as ig
from trainer.explaining import words as words_lib

log = logging.getLogger("trainer")
BUDGET_SHARE = 0.1  # of the run's training time: evaluation and the whole report in well under a quarter
BUDGET_FLOOR = 10.0  # seconds: a run of seconds still explains a few rows
_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("trainer.reporting", "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)


def _colour(weight: float, largest: float) -> str:
    share = abs(weight) / largest if largest > 0 else 0.0
    rgb = "220, 40, 40" if weight > 0 else "40, 90, 220"
    return f"background: rgba({rgb}, {share:.2f})"


def highlighted(words, segment: int = 0) -> markupsafe.Markup:
    """One text's words (of `segment`: a pair's second text is 1) as coloured HTML spans."""
    chosen = [word for word in words if word.segment == segment]
    largest = max((abs(word.weight) for word in chosen), default=0.0)
    return markupsafe.Markup(" ").join(
        markupsafe.Markup('<span class="w" style="{}" title="{:+.4g}">{}</span>').format(
            _colour(word.weight, largest), word.weight, word.text
        )
        for word in chosen
    )


def entry(explanation, pair: bool, texts: Sequence[str] | None = None, **columns) -> dict:
    """A template row: the explained target and outputs, the coloured text (and pair). With
    `texts` (the text and pair explained), their own words (words.in_texts), not the
    tokenizer's."""
    words = explanation.words if texts is None else words_lib.in_texts(explanation.words, texts)
    return {
        **columns,
        "explained": True,
        "target": explanation.target,
        "probability": explanation.probability,
        "output": explanation.output,
        "baseline": explanation.baseline_output,
        "steps": explanation.steps,
        "completeness_error": explanation.completeness_error,
        "text": highlighted(words, 0),
        "text_pair": highlighted(words, 1) if pair else None,
    }


def page(entries: Sequence[dict], title: str, steps: int, pair: bool, shown_of: int | None = None) -> str:
    """trainer.explain's HTML page of `entries` (entry())."""
    return _TEMPLATES.get_template("explained_texts.html.j2").render(
        title=title, entries=entries, steps=steps, pair=pair, baseline=ig.BASELINE, shown_of=shown_of
    )


def budget_seconds(train_seconds: float | None) -> float:
    """The report's explanations' time: BUDGET_SHARE of the run's training time (metrics.json's
    durations.train), at least BUDGET_FLOOR seconds."""
    return max(BUDGET_FLOOR, BUDGET_SHARE * (train_seconds or 0.0))


def report_section(
    model_dir: str,
    predictions: Mapping,
    label_names,
    task,
    steps: int,
    seed: int,
    count: int = 20,
    train_seconds: float | None = None,
    log_every_seconds: float = 30.0,
    timer=time.monotonic,
) -> dict | None:
    """The section's `count` rows and how they were computed, within budget_seconds of
    `train_seconds` (the run's training time); None when `count` is 0, there is no export, it
    cannot explain (trainer.explaining.attribute.explainable), or there is nothing to show."""
    from trainer.explaining import attribute, pacing

    split = "test" if "test" in predictions else "validation"
    if not count or split not in predictions or not len(predictions[split].texts):
        return None
    model = _explainer(model_dir)
    if model is None:
        return None
    p = predictions[split]
    rows = _rows(p, task, label_names, seed, count)
    need = _by_need(rows)
    texts = [str(p.texts[row]) for _, row in need]
    pairs = None if p.pairs is None else [str(p.pairs[row]) for _, row in need]
    pace = pacing.Pace(budget_seconds(train_seconds), timer=timer)
    explained = attribute.explain_texts(model, texts, pairs, steps, log_every_seconds=log_every_seconds, pace=pace)
    left_out = [(need[i][1], target) for i, target in pace.left_out]
    by_row = {row: (texts[i], None if pairs is None else pairs[i], explained[i]) for i, (_, row) in enumerate(need)}
    entries = [item for outcome, row in rows for item in _row_entries(outcome, row, *by_row[row], left_out)]
    done, spent = [e for es in explained for e in es], pace.spent()
    section = {
        "split": split,
        "entries": entries,
        "steps": steps,
        "baseline": ig.BASELINE,
        "pair": pairs is not None,
        "rows": (count + 1) // 2,
        "others": count // 2,
        "complete": float(np.mean([e.completeness_error <= attribute.TOLERANCE for e in done])) if done else None,
        "budget": {
            "seconds": pace.budget,
            "spent": spent,
            "train_seconds": train_seconds,
            "note": _budget_note(pace.budget, spent, train_seconds),
        },
        "incomplete": [
            _incomplete(row, e, steps)
            for (_, row), es in zip(need, explained)
            for e in es
            if e.completeness_error > attribute.TOLERANCE
        ],
        "left_out": [{"row": row, "target": target} for row, target in left_out],
    }
    _log(section, sum(bool(es) for es in explained))
    return section


def _explainer(model_dir: str):
    """The export of `model_dir` when it can explain, else None."""
    from trainer import storage
    from trainer.explaining import attribute
    from trainer.inference import loaded_model
    from trainer.serving import export

    if not storage.exists(storage.join(model_dir, "saved_model.pb")):
        return None
    model = export.load_module(model_dir)
    task = loaded_model.task_of(model)
    refused = task.refusal("explanations", "--report-explanations")
    if refused or not attribute.explainable(model):
        log.info("report: no token attributions: %s", refused or "the export has no explain_tokens (a TF-Hub encoder)")
        return None
    return model


def _by_need(rows: list[tuple]) -> list[tuple]:
    """`rows` in the order they are explained: the worst error, a sampled row, the next error,
    and so on, so that a budget spent early still shows some of each."""
    errors = [r for r in rows if r[0] == "error"]
    others = [r for r in rows if r[0] != "error"]
    return [r for couple in itertools.zip_longest(errors, others) for r in couple if r is not None]


def _row_entries(outcome: str, row: int, text: str, pair: str | None, explained, left_out) -> list:
    """One row's template rows: each explanation in the text's own words, then each target
    the budget left out."""
    texts = (text,) if pair is None else (text, pair)
    return [entry(e, pair is not None, texts, outcome=outcome, row=row) for e in explained] + [
        {"explained": False, "outcome": outcome, "row": row, "target": target, "text": text, "text_pair": pair}
        for left, target in left_out
        if left == row
    ]


def _incomplete(row: int, explanation, steps: int) -> dict:
    """A row that does not add up, and why: its steps were the most tried ("steps") or the
    budget had no time for more ("budget")."""
    from trainer.explaining import attribute

    most = explanation.steps >= steps * attribute.MAX_STEPS_FACTOR
    return {
        "row": row,
        "target": explanation.target,
        "steps": explanation.steps,
        "completeness_error": explanation.completeness_error,
        "why": "steps" if most else "budget",
    }


def _budget_note(budget: float, spent: float, train_seconds: float | None) -> str:
    rule = (
        f"{BUDGET_SHARE:.0%} of the run's training time ({progress.clock(train_seconds)}) but at "
        f"least {progress.clock(BUDGET_FLOOR)}"
        if train_seconds
        else "the least it gets: the run's training time is not recorded"
    )
    return f"Explaining had a time budget of {progress.clock(budget)}, {rule}, and took {progress.clock(spent)}."


def _log(section: dict, explained: int) -> None:
    left, incomplete = section["left_out"], section["incomplete"]
    log.info(
        "report: token attributions of %d %s texts in %s (%s integrated-gradients steps; "
        "budget %s; --report-explanations 0 leaves them out)",
        explained,
        section["split"],
        progress.clock(section["budget"]["spent"]),
        section["steps"],
        progress.clock(section["budget"]["seconds"]),
    )
    if left:
        log.info("report: not explained, the time budget being spent: rows %s", ", ".join(str(r["row"]) for r in left))
    for r in incomplete:
        log.info(
            "report: row %d does not add up within 5%% (%.1f%% off at %d steps: %s)",
            r["row"],
            100 * r["completeness_error"],
            r["steps"],
            "the most tried" if r["why"] == "steps" else "the time budget left none for more",
        )


def _rows(p, task, label_names, seed: int, count: int) -> list[tuple]:
    """[(outcome, row)]: up to half of `count` worst errors (rounded up), then a sample (seeded)
    of up to the rest of the other rows."""
    errors, others_count = (count + 1) // 2, count // 2
    # errors.csv's own measure of how wrong each row is, and whether it is an error.
    wrongness, is_error, _ = task.error_measure(p, np.asarray(label_names, dtype=object))
    everything = np.arange(len(wrongness))
    ranked_only = is_error is None  # every row ranked by its error (a score has no wrong label)
    if ranked_only:  # the largest errors, then a sample of the rest
        is_error = np.zeros(len(wrongness), bool)
        is_error[np.argsort(-wrongness, kind="stable")[:errors]] = True
    worst = everything[is_error][np.argsort(-wrongness[is_error], kind="stable")][:errors]
    others = everything[~is_error]
    sample = np.sort(np.random.default_rng(seed).choice(others, min(others_count, len(others)), replace=False))
    outcome = "other" if ranked_only else "correct"
    return [("error", int(row)) for row in worst] + [(outcome, int(row)) for row in sample]
