"""Words coloured by their attributions: report.html's section and trainer.explain's page.

A word's background is red where it pushed the explained output up and blue where it pulled
it down, its opacity its share of the text's largest attribution (by absolute value): each
text is scaled on its own, so a reader compares the words of one text, not texts. The
numbers are in each word's tooltip.

The report explains, with the exported model (trainer.explaining.attribute), up to half of
--report-explanations rows from its worst errors and the rest from a seeded sample of the other
rows of the test split (validation when there is no test split): a sample of correct
predictions, and for regression, where no row is simply right, of the rest.
"""
import logging
from typing import List, Mapping, Optional, Sequence

import jinja2
import markupsafe
import numpy as np

from trainer.explaining import integrated_gradients as ig
from trainer.reporting import errors as errors_lib

log = logging.getLogger("trainer")
_TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("trainer.reporting", "templates"),
                                autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                undefined=jinja2.StrictUndefined)


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
            _colour(word.weight, largest), word.weight, word.text) for word in chosen)


def entry(explanation, pair: bool, **columns) -> dict:
    """A template row: the explained target and outputs, the coloured text (and pair)."""
    return {**columns, "target": explanation.target, "probability": explanation.probability,
            "output": explanation.output,
            "baseline": explanation.baseline_output,
            "completeness_error": explanation.completeness_error,
            "text": highlighted(explanation.words, 0),
            "text_pair": highlighted(explanation.words, 1) if pair else None}


def page(entries: Sequence[dict], title: str, steps: int, pair: bool, shown_of: Optional[int] = None) -> str:
    """trainer.explain's HTML page of `entries` (entry())."""
    return _TEMPLATES.get_template("explained_texts.html.j2").render(
        title=title, entries=entries, steps=steps, pair=pair, baseline=ig.BASELINE,
        shown_of=shown_of)


def report_section(model_dir: str, predictions: Mapping, label_names, task: str, steps: int,
                   seed: int, count: int = 20) -> Optional[dict]:
    """The section's `count` rows and how they were computed; None when `count` is 0, there is
    no export, it cannot explain (trainer.explaining.attribute.explainable), or there is nothing
    to show."""
    from trainer.explaining import attribute
    from trainer.serving import export

    split = "test" if "test" in predictions else "validation"
    if not count or split not in predictions or not len(predictions[split].texts):
        return None
    from trainer import storage

    if not storage.exists(storage.join(model_dir, "saved_model.pb")):
        return None
    model = export.load_module(model_dir)
    if not attribute.explainable(model):
        log.info("report: no token attributions: the export has no explain_tokens "
                 "(a TF-Hub encoder)")
        return None
    p = predictions[split]
    rows = _rows(p, task, label_names, seed, count)
    texts = p.texts[[row for _, row in rows]]
    pairs = None if p.pairs is None else p.pairs[[row for _, row in rows]]
    explained = attribute.explain_texts(model, texts, pairs, steps)
    entries = [entry(e, pairs is not None, outcome=outcome, row=int(row))
               for (outcome, row), row_explanations in zip(rows, explained) for e in row_explanations]
    errors = [e.completeness_error for es in explained for e in es]
    log.info("report: token attributions of %d %s texts (%d integrated-gradients steps; "
             "--report-explanations 0 leaves them out)", len(rows), split, steps)
    return {"split": split, "entries": entries, "steps": steps, "baseline": ig.BASELINE,
            "pair": pairs is not None, "rows": (count + 1) // 2, "others": count // 2,
            "complete": float(np.mean(np.asarray(errors) <= 0.05)) if errors else None}


def _rows(p, task: str, label_names, seed: int, count: int) -> List[tuple]:
    """[(outcome, row)]: up to half of `count` worst errors (rounded up), then a sample (seeded)
    of up to the rest of the other rows."""
    errors, others_count = (count + 1) // 2, count // 2
    # errors.csv's own measure of how wrong each row is, and whether it is an error.
    wrongness, is_error, _ = errors_lib._MEASURES[task](p, np.asarray(label_names, dtype=object))
    everything = np.arange(len(wrongness))
    if is_error is None:  # regression: the largest errors, then a sample of the rest
        is_error = np.zeros(len(wrongness), bool)
        is_error[np.argsort(-wrongness, kind="stable")[:errors]] = True
    worst = everything[is_error][np.argsort(-wrongness[is_error], kind="stable")][:errors]
    others = everything[~is_error]
    sample = np.sort(np.random.default_rng(seed).choice(others, min(others_count, len(others)),
                                                         replace=False))
    outcome = "other" if task == "regression" else "correct"
    return [("error", int(row)) for row in worst] + [(outcome, int(row)) for row in sample]
