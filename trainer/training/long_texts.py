"""Texts longer than --max-seq-length: how many each split has, what was done with them, and
how the model scores by text length.

A text's full length is its token count with the special tokens, before the cut (the token
cache keeps it beside the cut length). Over the limit, the text is cut to its first
--max-seq-length tokens (--long-texts truncate), or to its first and last ones (head-tail), and
the model never sees the rest, which is worth a warning: on IMDB reviews most texts are cut,
and a verdict is often in the last lines. metrics.json then breaks
the validation and test metrics down by full length, up to 1x, 1-4x and over 4x the limit, so a
user sees where long texts stand.
"""
import logging
from typing import Dict

import numpy as np

log = logging.getLogger("trainer")

# metrics.json's length buckets: (key, lowest and highest full length as multiples of the limit)
BUCKETS = (("up_to_1x", 0, 1), ("1x_to_4x", 1, 4), ("over_4x", 4, None))


def cut_counts(tokenized: dict, limit: int) -> Dict[str, int]:
    """{split: how many of its texts are longer than `limit` tokens} (metrics.json's
    truncated_texts)."""
    return {name: int((split.full_lengths > limit).sum()) for name, split in tokenized.items()}


def log_cut(cut: Dict[str, int], sizes: Dict[str, int], limit: int, mode: str = "truncate") -> None:
    """One warning line when any text was cut, naming each split's share and what was kept."""
    if not any(cut.values()):
        return
    shares = ", ".join(f"{name} {count:,} of {sizes[name]:,} ({count / max(sizes[name], 1):.0%})"
                       for name, count in cut.items())
    kept = ("their first and last tokens (--long-texts head-tail)" if mode == "head-tail"
            else "their first tokens (--long-texts truncate)")
    log.warning("texts longer than --max-seq-length %d tokens are cut to %d, %s; the model "
                "never sees the rest: %s (a larger --max-seq-length, up to 512, keeps more of "
                "each)", limit, limit, kept, shares)


def by_length(full_lengths: np.ndarray, limit: int, outputs: np.ndarray, labels: np.ndarray,
              task, label_names) -> dict:
    """{bucket: {"tokens", "examples", the loss and the task's summary metrics}} of one split,
    from its outputs at the export's decisions (task.summarize)."""
    out = {}
    for key, low, high in BUCKETS:
        rows = full_lengths > low * limit
        if high is not None:
            rows &= full_lengths <= high * limit
        tokens = (f"up to {limit}" if not low else f"over {low * limit}" if high is None
                  else f"{low * limit + 1}-{high * limit}")
        out[key] = {"tokens": tokens, "examples": int(rows.sum())}
        if rows.any():
            summary = task.summarize(outputs[rows], labels[rows], label_names)
            out[key].update({name: summary[name] for name in task.epoch_metrics()})
    return out
