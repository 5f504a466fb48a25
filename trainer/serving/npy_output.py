"""trainer.predict's .npy --output: the vectors of an embedding model as one float32 array, a row
per input row ([rows, width], or [rows, 2, width] for a file of two texts a row: each text's
vector), the file numpy.load reads.

Rows arrive a chunk at a time and their count is known only at the end, so the header is
written first with room for any shape (HEADER_BYTES) and rewritten in place once the last row
is in: the rows stream to disk, never held in memory. An empty text has no vector: its row is
NaN, so that row i is always input row i.
"""

import struct

import numpy as np

MAGIC = b"\x93NUMPY\x01\x00"  # the .npy format, version 1.0 (numpy.lib.format)
HEADER_BYTES = 128  # the magic, the header's length and a dict of any shape, padded with spaces


def header(shape: tuple) -> bytes:
    """The .npy header of a little-endian float32 C-order array of `shape`, HEADER_BYTES long."""
    text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    room = HEADER_BYTES - len(MAGIC) - 2
    return MAGIC + struct.pack("<H", room) + (text.ljust(room - 1) + "\n").encode("latin1")


class NpyRows:
    """Appends rows of vectors to a binary `handle` (seekable) and writes the header they make."""

    def __init__(self, handle):
        self.handle, self.rows, self.width, self.sides, self._empty_first = handle, 0, None, None, 0
        handle.write(header((0, 0)))

    def append(self, columns: list) -> None:
        """`columns`: for each side (a text, then its pair), a sequence of vectors (a list of
        floats; anything else, as an empty text's missing value, for none), all of the same
        length: the chunk's rows."""
        self.sides = self.sides or len(columns)
        for row in zip(*columns):
            if self.width is None and not any(map(_is_vector, row)):
                self._empty_first += 1  # written once a vector tells the width
                continue
            if self.width is None:
                self.width = len(next(filter(_is_vector, row)))
                self._write_empty(self._empty_first)
            self.handle.write(np.stack([self._vector(vector) for vector in row]).tobytes())
            self.rows += 1

    def close(self) -> None:
        """The rows' header, in place of the first one."""
        if self.width is None:  # no text had a vector: rows of width 0
            self.width = 0
            self._write_empty(self._empty_first)
        shape = (self.rows, self.width) if (self.sides or 1) == 1 else (self.rows, self.sides, self.width)
        self.handle.seek(0)
        self.handle.write(header(shape))

    def _vector(self, vector) -> np.ndarray:
        if not _is_vector(vector):
            return np.full(self.width, np.nan, np.float32)
        return np.asarray(vector, np.float32)

    def _write_empty(self, count: int) -> None:
        self.handle.write(np.full((count, (self.sides or 1) * self.width), np.nan, np.float32).tobytes())
        self.rows += count


def _is_vector(value) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))
