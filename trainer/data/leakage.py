"""Leakage between splits: a validation or test file that is the training file is refused, and
texts that are in the training split as well as a held-out one are counted and reported.

A held-out score on texts the model trained on overstates what it does on new ones. A file given
twice (the same path, or a copy of it) makes every held-out score such a score, so it is an
error; scattered repeats (a scrape that holds some posts twice) are common and only worth a
warning with their count.
"""

import dataclasses
import hashlib
import logging
import os
import re
from collections.abc import Iterable, Sequence

import numpy as np

from trainer import storage
from trainer.errors import UserError

log = logging.getLogger("trainer")


def text_hashes(frame, columns: Sequence[str | None]) -> np.ndarray:
    """uint64 per row of its text (and pair): rows with equal hashes hold the same texts."""
    import pandas as pd

    used = [c for c in columns if c]
    return pd.util.hash_pandas_object(frame[used].astype(str), index=False).to_numpy(np.uint64)


def _local(path: str) -> bool:
    return "://" not in path


def _size(path: str) -> int:
    if _local(path):
        return os.path.getsize(path)
    import tensorflow as tf

    return tf.io.gfile.stat(path).length


def _digest(path: str) -> str:
    digest = hashlib.sha256()
    with storage.open_binary(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _same_file(a: str, b: str) -> bool:
    """One path, or two files with the same bytes (hashed only when their sizes agree)."""
    if _local(a) and _local(b) and os.path.exists(a) and os.path.exists(b):
        if os.path.samefile(a, b):
            return True
    elif a == b:
        return True
    return _size(a) == _size(b) and _digest(a) == _digest(b)


def check_held_out_files(training: str, held_out: dict[str, str | None]) -> None:
    """Stops when a file of --validation-file or --testing-file ({flag: spec}) is one of the
    training files, by path or by content."""
    train = storage.expand_paths(training, "--training-file")
    for flag, spec in held_out.items():
        for path in storage.expand_paths(spec, flag) if spec else ():
            same = next((t for t in train if _same_file(path, t)), None)
            if same is not None:
                what = "is" if path == same else "has the same content as"
                other = (
                    ", or leave the flag out to hold out a stratified --validation-fraction"
                    if flag == "--validation-file"
                    else ""
                )
                raise UserError(
                    f"{flag}: {path} {what} the training file {same}: every score on "
                    f"it would be measured on rows the model trained on; give a file "
                    f"of other rows{other}"
                )


def report_overlaps(hashes: dict[str, np.ndarray]) -> dict[str, int]:
    """{held-out split: its rows whose text is also in the training split}, each logged."""
    shared = {name: int(np.isin(values, hashes["train"]).sum()) for name, values in hashes.items() if name != "train"}
    for name, count in shared.items():
        if count:
            log.warning(
                "overlap: %d of %d %s rows repeat a training text exactly; their scores "
                "overstate what the model does on new texts (remove the repeats, or split "
                "with python -m trainer.prepare, which keeps repeats in one split)",
                count,
                len(hashes[name]),
                name,
            )
    return shared


# A held-out text shorter than this many words is not looked for inside training texts: short
# phrases ("a great movie") recur in any corpus by chance, while five or more words in the same
# order inside a longer text are a copy (a phrase of a parse tree, a quoted reply, a template).
CONTAINED_MIN_WORDS = 5
# Bounds of the containment count on large data: held-out texts looked for per split, and
# training (and unlabeled) texts looked in, each a seeded sample when a split holds more.
CONTAINED_HELD_OUT_ROWS = 1_000
CONTAINED_TRAINING_ROWS = 200_000
# Examples of contained texts the warning and metrics.json show.
CONTAINED_EXAMPLES = 2
_WORD = re.compile(r"\w+")


def words(text: str) -> tuple:
    """A text's words for the containment count: lower-cased runs of letters and digits, so that
    case, punctuation and spacing do not hide a copy."""
    return tuple(_WORD.findall(text.lower()))


@dataclasses.dataclass
class Contained:
    """Held-out texts found inside training texts: how many of how many were looked for, and
    up to CONTAINED_EXAMPLES (held-out text, training text that holds it) pairs."""

    count: int
    checked: int
    examples: list
    training_rows: int

    def as_json(self, sampled: bool) -> dict:
        """metrics.json's record; `sampled`: whether a split was larger than the sample read."""
        return {
            "contained": self.count,
            "checked": self.checked,
            "training_rows_searched": self.training_rows,
            "sampled": sampled,
            "min_words": CONTAINED_MIN_WORDS,
            "examples": [{"held_out": h, "inside": t} for h, t in self.examples],
        }


def find_contained(held_out: Sequence[str], training: Iterable[str]) -> Contained:
    """Held-out texts of `CONTAINED_MIN_WORDS` words or more whose words appear, in order and
    whole, inside a longer training text (or one that differs only in case and punctuation).
    Byte-equal repeats are not counted here: `report_overlaps` counts those.

    Each held-out text is indexed by its first five words, so the training texts are read once,
    five-word window by window, and only a window that starts some held-out text is compared
    further: linear in the training words (100,000 SST-2 phrases in well under a second)."""
    n = CONTAINED_MIN_WORDS
    # first five words -> {length in words: {words: held-out indices}}: a window that starts
    # some held-out texts is compared once per distinct length, however many texts share it.
    wanted: dict[tuple, dict[int, dict[tuple, list]]] = {}
    for i, text in enumerate(held_out):
        w = words(text)
        if len(w) >= n:
            wanted.setdefault(w[:n], {}).setdefault(len(w), {}).setdefault(w, []).append(i)
    found: dict[int, str] = {}
    rows = 0
    for text in training:
        rows += 1
        w = words(text) if wanted else ()
        for start, key in enumerate(zip(w, w[1:], w[2:], w[3:], w[4:])):
            for length, targets in wanted.get(key, {}).items():
                for i in targets.get(w[start : start + length], ()):
                    if i not in found and text != held_out[i]:
                        found[i] = text
    examples = [(held_out[i], found[i]) for i in sorted(found)[:CONTAINED_EXAMPLES]]
    return Contained(len(found), len(held_out), examples, rows)
