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

import numpy as np

log = logging.getLogger("trainer")

# metrics.json's length buckets: (key, lowest and highest full length as multiples of the limit)
BUCKETS = (("up_to_1x", 0, 1), ("1x_to_4x", 1, 4), ("over_4x", 4, None))


def cut_counts(tokenized: dict, limit: int) -> dict[str, int]:
    """{split: how many of its texts are longer than `limit` tokens} (metrics.json's
    truncated_texts)."""
    return {name: int((split.full_lengths > limit).sum()) for name, split in tokenized.items()}


def log_cut(
    cut: dict[str, int],
    sizes: dict[str, int],
    limit: int,
    long_texts="truncate",
    tokenized: dict | None = None,
    specials: int = 2,
    pairs: bool = False,
) -> None:
    """One warning line when any text was cut, naming each split's share and what was kept;
    with windows (`long_texts` a input_pipeline.LongTexts), one info line, and a warning naming the
    texts longer than --max-windows windows hold (`specials`: the tokens packing adds)."""
    if not any(cut.values()):
        return
    shares = ", ".join(
        f"{name} {count:,} of {sizes[name]:,} ({count / max(sizes[name], 1):.0%})" for name, count in cut.items()
    )
    from trainer.data.input_pipeline import LongTexts

    long_texts = LongTexts.of(long_texts)
    mode = long_texts.mode
    if mode == "windows":
        _log_windows(shares, limit, long_texts, tokenized, specials)
        return
    kept = (
        "their first and last tokens (--long-texts head-tail)"
        if mode == "head-tail"
        else "their first tokens (--long-texts truncate)"
    )
    if pairs:
        kept = f"the longer text of a pair first, each text keeping {kept}"
    log.warning(
        "%s longer than --max-seq-length %d tokens are cut to %d, %s; the model "
        "never sees the rest: %s (a larger --max-seq-length, up to 512, keeps more of "
        "each)",
        "pairs" if pairs else "texts",
        limit,
        limit,
        kept,
        shares,
    )


def window_capacity(limit: int, long_texts, specials: int) -> int:
    """The longest text (its full length: tokens and special ones) --max-windows windows hold."""
    budget = limit - specials
    return specials + budget + (long_texts.max_windows - 1) * (budget - long_texts.window_overlap)


def _log_windows(shares: str, limit: int, long_texts, tokenized, specials: int) -> None:
    log.info(
        "texts longer than --max-seq-length %d tokens are read in windows of %d "
        "overlapping by %d (--long-texts windows), pooled by the model: %s",
        limit,
        limit,
        long_texts.window_overlap,
        shares,
    )
    capacity = window_capacity(limit, long_texts, specials)
    capped = {name: int((split.full_lengths > capacity).sum()) for name, split in (tokenized or {}).items()}
    if any(capped.values()):
        log.warning(
            "texts longer than %d tokens lose their end past --max-windows %d windows: "
            "%s (a larger --max-windows reads more of each)",
            capacity,
            long_texts.max_windows,
            ", ".join(f"{name} {count:,}" for name, count in capped.items()),
        )


def by_length(full_lengths: np.ndarray, limit: int, outputs: np.ndarray, labels: np.ndarray, task, label_names) -> dict:
    """{bucket: {"tokens", "examples", the loss and the task's summary metrics}} of one split,
    from its outputs at the export's decisions (task.summarize)."""
    out = {}
    for key, low, high in BUCKETS:
        rows = full_lengths > low * limit
        if high is not None:
            rows &= full_lengths <= high * limit
        tokens = (
            f"up to {limit}"
            if not low
            else f"over {low * limit}"
            if high is None
            else f"{low * limit + 1}-{high * limit}"
        )
        out[key] = {"tokens": tokens, "examples": int(rows.sum())}
        if rows.any():
            summary = task.summarize(outputs[rows], labels[rows], label_names)
            out[key].update({name: summary[name] for name in task.epoch_metrics()})
    return out
