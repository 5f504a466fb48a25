"""trainer.predict's .npy --output (trainer/serving/npy_output.py): the vectors as the array
numpy.load reads, a row per input row, written as the chunks come."""

import io

import numpy as np

from trainer.serving.npy_output import HEADER_BYTES, NpyRows, header


def written(*chunks) -> np.ndarray:
    handle = io.BytesIO()
    rows = NpyRows(handle)
    for chunk in chunks:
        rows.append(chunk)
    rows.close()
    handle.seek(0)
    return np.load(handle)


def test_the_header_of_any_shape_takes_the_same_bytes():
    assert len(header((0, 0))) == len(header((10**12, 2, 4096))) == HEADER_BYTES


def test_chunks_of_vectors_become_one_float32_array_in_row_order():
    got = written([[[1, 2], [3, 4]]], [[[5, 6]]])
    assert got.dtype == np.float32 and got.tolist() == [[1, 2], [3, 4], [5, 6]]


def test_an_empty_texts_row_is_nan_even_before_the_first_vector():
    got = written([[None]], [[[1, 2], None]])
    assert got.shape == (3, 2) and np.isnan(got[[0, 2]]).all() and got[1].tolist() == [1, 2]


def test_a_file_of_pairs_gives_each_row_its_two_vectors():
    got = written([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])
    assert got.shape == (2, 2, 2) and got[1].tolist() == [[3, 4], [7, 8]]


def test_rows_without_any_vector_are_an_array_of_width_0():
    assert written([[None, None]]).shape == (2, 0)
