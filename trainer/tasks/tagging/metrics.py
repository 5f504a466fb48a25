"""Entity-level precision, recall and F1, micro and per type: a predicted entity counts when its
type, first word and last word all equal a gold entity's (seqeval's strict IOB2 mode,
tags.entities)."""

from collections import Counter
from collections.abc import Sequence

from trainer.tasks.tagging import tags as iob2


def _rates(true_positives: int, predicted: int, gold: int) -> dict:
    """precision, recall and F1 of counts; 0 where a ratio has no denominator (seqeval's
    zero_division default, with its warning left out)."""
    precision = true_positives / predicted if predicted else 0.0
    recall = true_positives / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
    """{"precision", "recall", "f1", "per_type": {type: {..., "support"}}} of sentences'
    `predicted` tags against their `gold` tags (one list of tags per sentence, word for word)."""
    found = {"gold": Counter(), "predicted": Counter(), "right": Counter()}
    for number, (truth, guess) in enumerate(zip(gold, predicted)):
        if len(truth) != len(guess):
            raise ValueError(f"sentence {number}: {len(truth)} gold tags but {len(guess)} predicted")
        true_set, guessed = set(iob2.entities(truth)), set(iob2.entities(guess))
        found["gold"].update(kind for kind, _, _ in true_set)
        found["predicted"].update(kind for kind, _, _ in guessed)
        found["right"].update(kind for kind, _, _ in true_set & guessed)
    types = sorted(set(found["gold"]) | set(found["predicted"]))
    per_type = {
        kind: {
            **_rates(found["right"][kind], found["predicted"][kind], found["gold"][kind]),
            "support": found["gold"][kind],
        }
        for kind in types
    }
    totals = [sum(found[key].values()) for key in ("right", "predicted", "gold")]
    return {**_rates(*totals), "support": totals[2], "per_type": per_type}


def span_scores(gold: Sequence[frozenset], predicted: Sequence[frozenset]) -> dict:
    """Micro precision, recall and F1 of sentences' `predicted` entities against their `gold`
    ones, each a set of (type, start, end) character offsets: the same strict match as
    entity_scores', on what an export returns (its words need not be a file's tokens)."""
    right = sum(len(truth & guess) for truth, guess in zip(gold, predicted))
    return _rates(right, sum(map(len, predicted)), sum(map(len, gold)))
