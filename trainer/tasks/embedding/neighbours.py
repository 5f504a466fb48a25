"""The report's nearest neighbours of an embedding model: a few validation texts, each with the
other validation texts whose vectors are closest to its own. They show what the vectors group
together, which a correlation alone does not."""

import numpy as np

TEXTS = 5  # texts shown, the split's first distinct ones
NEIGHBOURS = 3  # the closest other texts listed for each


def nearest(predictions, texts: int = TEXTS, neighbours: int = NEIGHBOURS) -> list:
    """[{"text", "neighbours": [{"text", "cosine"}, ...]}] over the distinct texts of a split's
    rows (SplitPredictions: texts, pairs or None and their unit vectors [N, sides, H]), closest
    first."""
    sides = [predictions.texts] + ([] if predictions.pairs is None else [predictions.pairs])
    strings = [str(text) for side in sides for text in side]
    vectors = np.concatenate([predictions.vectors[:, side] for side in range(len(sides))])
    distinct = {text: index for index, text in reversed(list(enumerate(strings)))}  # first of each
    order = sorted(distinct.values())
    candidates = np.asarray(vectors[order], np.float64)
    cosines = candidates @ candidates.T
    np.fill_diagonal(cosines, -np.inf)
    shown = []
    for row in range(min(texts, len(order))):
        closest = np.argsort(-cosines[row], kind="stable")[: min(neighbours, len(order) - 1)]
        shown.append(
            {
                "text": strings[order[row]],
                "neighbours": [{"text": strings[order[j]], "cosine": float(cosines[row, j])} for j in closest],
            }
        )
    return shown
