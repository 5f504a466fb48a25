"""Leakage between splits: a validation or test file that is the training file is refused, and
texts that are in the training split as well as a held-out one are counted and reported.

A held-out score on texts the model trained on overstates what it does on new ones. A file given
twice (the same path, or a copy of it) makes every held-out score such a score, so it is an
error; scattered repeats (a scrape that holds some posts twice) are common and only worth a
warning with their count.
"""
import hashlib
import logging
import os
from typing import Dict, Optional, Sequence

import numpy as np

from trainer import storage
from trainer.errors import UserError

log = logging.getLogger("trainer")


def text_hashes(frame, columns: Sequence[Optional[str]]) -> np.ndarray:
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


def check_held_out_files(training: str, held_out: Dict[str, Optional[str]]) -> None:
    """Stops when a file of --validation-file or --testing-file ({flag: spec}) is one of the
    training files, by path or by content."""
    train = storage.expand_paths(training, "--training-file")
    for flag, spec in held_out.items():
        for path in storage.expand_paths(spec, flag) if spec else ():
            same = next((t for t in train if _same_file(path, t)), None)
            if same is not None:
                what = "is" if path == same else "has the same content as"
                other = (", or leave the flag out to hold out a stratified --validation-fraction"
                         if flag == "--validation-file" else "")
                raise UserError(f"{flag}: {path} {what} the training file {same}: every score on "
                                f"it would be measured on rows the model trained on; give a file "
                                f"of other rows{other}")


def report_overlaps(hashes: Dict[str, np.ndarray]) -> Dict[str, int]:
    """{held-out split: its rows whose text is also in the training split}, each logged."""
    shared = {name: int(np.isin(values, hashes["train"]).sum())
              for name, values in hashes.items() if name != "train"}
    for name, count in shared.items():
        if count:
            log.warning("overlap: %d of %d %s rows repeat a training text exactly; their scores "
                        "overstate what the model does on new texts (remove the repeats, or split "
                        "with python -m trainer.prepare, which keeps repeats in one split)",
                        count, len(hashes[name]), name)
    return shared
