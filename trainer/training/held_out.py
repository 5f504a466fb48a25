"""Stage: held-out texts found inside training texts, counted and warned about before training.

A validation or test text that is a phrase of a longer training text (SST-2's GLUE training set
holds every phrase of its sentences' parse trees; a reply quotes the post it answers; a ticket
repeats its template) is scored on words the model has trained on, and with --unlabeled-file a
teacher has given the student its answer for them. Such scores overstate what the model does on
new texts, and nothing else in a run shows it: exact repeats are counted as the splits are read
(data/leakage.report_overlaps), this counts the containment (data/leakage.find_contained) on a
bounded, seeded sample of each split, and metrics.json and the report record it.
"""

import dataclasses
import logging

import numpy as np

from trainer.data import leakage
from trainer.data.splits import TEST, TRAIN, UNLABELED, VALIDATION
from trainer.training.context import RunContext

log = logging.getLogger("trainer")


def check_containment(ctx: RunContext) -> None:
    """Counts each held-out split's texts found inside a training or unlabeled text
    (ctx.contained: {split: leakage.Contained as JSON}), warning with two examples."""
    datasets, seed = ctx.datasets, ctx.config.train.seed
    sample = {
        TRAIN: _sample(datasets.train, leakage.CONTAINED_TRAINING_ROWS, seed),
        VALIDATION: _sample(datasets.validation, leakage.CONTAINED_HELD_OUT_ROWS, seed),
    }
    if datasets.test is not None:
        sample[TEST] = _sample(datasets.test, leakage.CONTAINED_HELD_OUT_ROWS, seed)
    if datasets.unlabeled is not None:
        sample[UNLABELED] = _sample(datasets.unlabeled, leakage.CONTAINED_TRAINING_ROWS, seed)
    sampled = {name: len(part) < len(datasets.splits()[name]) for name, part in sample.items()}
    texts = dataclasses.replace(
        datasets,
        train=sample[TRAIN],
        validation=sample[VALIDATION],
        test=sample.get(TEST),
        unlabeled=sample.get(UNLABELED),
    )
    read = texts.read_texts(*sample)
    searched = [t for name in (TRAIN, UNLABELED) if name in read for t in _texts(read[name])]
    where = "training or unlabeled texts" if UNLABELED in read else "training texts"
    ctx.contained = {}
    for name in (VALIDATION, TEST):
        if name not in read:
            continue
        found = leakage.find_contained(_texts(read[name]), searched)
        was_sampled = sampled[name] or sampled[TRAIN] or sampled.get(UNLABELED, False)
        ctx.contained[name] = found.as_json(was_sampled)
        if found.count:
            example = "; ".join(
                f"{held!r} inside {inside!r}" for held, inside in (_clip(h, t) for h, t in found.examples)
            )
            log.warning(
                "warning: %s of %s %s texts appear inside %s%s (e.g. %s): %s scores will be optimistic",
                f"{found.count:,}",
                f"{found.checked:,}",
                name,
                where,
                " (a seeded sample)" if was_sampled else "",
                example,
                name,
            )


def _sample(split, rows: int, seed: int):
    """The split, or a seeded `rows` of it (in file order, as the texts are read)."""
    if len(split) <= rows:
        return split
    return split.subset(np.sort(np.random.default_rng(seed).choice(len(split), rows, replace=False)))


def _texts(read: tuple) -> list:
    """A split's texts, with the pair's second texts after them (each looked for on its own)."""
    texts, pairs = read
    return list(texts) + (list(pairs) if pairs is not None else [])


def _clip(held: str, inside: str, width: int = 60) -> tuple:
    """An example short enough for one log line."""
    cut = lambda text: text if len(text) <= width else text[: width - 3] + "..."  # noqa: E731
    return cut(held.strip()), cut(inside.strip())
