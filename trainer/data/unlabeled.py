"""--unlabeled-file: texts without labels, which a teacher labels for its student.

Read as the training files are (CSV, TSV, JSON Lines or a JSON array, globs, gs://, .gz), one
chunk at a time: only each row's position and its text's hash stay in memory, so 100k rows
cost a few megabytes; the texts are read again as a stream by the teacher and the token cache.
The text (and pair) columns are the training file's, found by name as in every other file.

A row whose text is exactly a validation or test text is dropped: the student would learn the
teacher's answer on a row it is then scored on. Rows with an empty text are skipped. The log
says how many of each.
"""

import logging
from collections.abc import Sequence

import numpy as np

from trainer.data import leakage
from trainer.errors import UserError
from trainer.reading import conform, split_frames

log = logging.getLogger("trainer")

FLAG = "--unlabeled-file"
CHUNK_ROWS = 50_000


def load(spec: str, columns: Sequence[str | None], delimiter: str | None, held_out: dict[str, np.ndarray]):
    """The unlabeled rows of `spec` as a splits.Split (labels NaN until the teacher's are
    attached), without the texts `held_out` ({split: text hashes}) holds."""
    from trainer.data.splits import Split

    used = [c for c in columns if c]
    positions, hashes, files, done, empty = [], [], [], 0, 0
    for frame in split_frames(spec, FLAG, CHUNK_ROWS, delimiter):
        frame = conform(frame, used)
        missing = [c for c in used if c not in frame.columns]
        if missing:
            raise UserError(
                f"{FLAG}: {frame['_file'].iloc[0]} has no column {missing[0]!r} (the "
                f"training data's text column); its columns are "
                f"{[c for c in frame.columns if not str(c).startswith('_')]}"
            )
        blank = np.zeros(len(frame), bool)
        for column in used:
            blank |= frame[column].isna().to_numpy() | (frame[column].astype(str).str.strip() == "")
        empty += int(blank.sum())
        positions.append(done + np.flatnonzero(~blank))
        hashes.append(leakage.text_hashes(frame.loc[~blank], used))
        files.extend(f for f in frame["_file"].unique() if f not in files)
        done += len(frame)
    positions, hashes = np.concatenate(positions).astype(np.int64), np.concatenate(hashes)
    shown = np.zeros(len(hashes), bool)
    for values in held_out.values():
        shown |= np.isin(hashes, values)
    if not (~shown).any():
        raise UserError(f"{FLAG}: {spec} holds no text that is not empty or a validation or test text")
    log.info(
        "unlabeled texts: %d of %d rows of %s kept (%d empty, %d a validation or test text exactly, dropped)",
        int((~shown).sum()),
        done,
        spec,
        empty,
        int(shown.sum()),
    )
    return Split(
        np.full(int((~shown).sum()), np.nan, np.float32), ",".join(files), spec, positions[~shown], hashes[~shown]
    )
