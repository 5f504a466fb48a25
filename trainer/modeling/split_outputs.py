"""The model's outputs over a whole split, in row order, for the task to score (Task.summarize)."""

import numpy as np


def predict_logits(model, dataset, callbacks=()) -> tuple[np.ndarray, np.ndarray]:
    """(logits [N, C], labels [N]) of one pass over `dataset` (features, labels, weights), in
    row order when the features number the rows; weight-0 rows are padding and dropped. Class
    ids come back as int64, regression targets (and a regression model's outputs in place of
    logits) as floats."""
    out = model.predict(dataset, verbose=0, callbacks=list(callbacks))
    keep = out["weight"] > 0
    order = np.argsort(out["row"][keep], kind="stable") if "row" in out else slice(None)
    labels = out["label"][keep][order]
    return out["logits"][keep][order], labels if labels.dtype.kind == "f" else labels.astype(np.int64)
