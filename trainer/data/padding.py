"""The padding ladder: the few lengths batches of token rows are padded to, shared by training's
batches (input_pipeline.py) and prediction's (trainer.inference.loaded_model), numpy only, so the ONNX
runtime, which has no TensorFlow, batches as the SavedModel does.
"""

import numpy as np

_PADDED_LENGTHS = (8, 12, 16, 20, 24, 28, 32, 36, 40, 48, 56, 64, 80, 96, 128, 192, 256, 384, 512)


def padded_lengths(max_seq_length: int, windows: int = 1) -> tuple:
    """The sequence lengths batches are padded to: a short fixed ladder ending at the maximum;
    with --long-texts windows, then whole windows: a row of k windows is k * max_seq_length
    tokens wide (the last window padded), which trainer.modeling.windows splits again."""
    return (
        tuple(n for n in _PADDED_LENGTHS if n < max_seq_length)
        + (max_seq_length,)
        + tuple(k * max_seq_length for k in range(2, windows + 1))
    )


def padded_to(lengths, ladder) -> np.ndarray:
    """The ladder length each row of `lengths` tokens is padded to: the first that holds it.
    Training's buckets and prediction's batches group rows by it, so both pad alike."""
    ladder = np.asarray(ladder)
    return ladder[np.searchsorted(ladder, lengths, side="left")]
