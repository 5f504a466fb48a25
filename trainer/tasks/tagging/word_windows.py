"""Which window of a long text each word is read in, in the graph: a tagger reads a text of any
length (issue #64), its pieces cut into overlapping windows, and tags each word once, in the
window where the word has the most context.

The windows are --long-texts windows' (preprocessing.split_into_windows), without its cap: with
`budget` pieces per window (--max-seq-length less the start and end tokens) and `overlap` pieces
shared by consecutive windows, stride = budget - overlap, window k of a text of n pieces holds its
pieces [k * stride, min(k * stride + budget, n)), and K = 1 + ceil(max(n - budget, 0) / stride)
windows cover it (preprocessing.window_counts). A text that fits is one window, as training
packed it.

A word is read at its first piece, p (its offset among its text's pieces). In each window k that
holds p, its context is the fewer of the pieces before it in the window, p - k * stride, and of
those after it, k * stride + budget - 1 - p; a side where the window reaches the text's own start
(k = 0) or end (k = K - 1) has nothing cut, so it counts as unlimited. The word is read in the
window where its context is largest, the first of them on a tie; its position in that window's
packed row is 1 + p - k * stride (after the start token). With overlap half the budget (the
export's), a word is read with at least a quarter of a window on each side the window cuts.

A runtime outside TensorFlow (the ONNX one) mirrors exactly these formulas: the windows'
pieces, the candidates k from max(0, ceil((p - budget + 1) / stride)) to min(K - 1,
floor(p / stride)), the context, and the first largest.
"""

import tensorflow as tf

from trainer.modeling.encoders import preprocessing

# No cap on the windows of a text: every word is read (the sentence tasks' --max-windows).
UNCAPPED = tf.int64.max


def split(pieces: tf.RaggedTensor, budget: int, overlap: int):
    """(windows [N, (pieces), (1)], windows per text [B] int64) of texts' pieces [B, (words),
    (pieces)]: a text's windows are consecutive rows (preprocessing.split_into_windows)."""
    return preprocessing.split_into_windows(pieces, budget, overlap, UNCAPPED)


def reading_windows(first_pieces: tf.RaggedTensor, windows: tf.Tensor, budget: int, overlap: int):
    """(window [B, (W)], offset [B, (W)]), int64: for each word whose first piece is at
    `first_pieces` [B, (W)] (int64, among its text's pieces), the window of its text it is read
    in (of its text's `windows` [B]), and its first piece's offset among that window's pieces."""
    stride = budget - overlap
    first = tf.cast(first_pieces.flat_values, tf.int64)
    last = tf.repeat(tf.cast(windows, tf.int64) - 1, first_pieces.row_lengths())
    low = tf.maximum((first - budget + stride) // stride, 0)  # ceil((p - budget + 1) / stride)
    high = tf.maximum(tf.minimum(first // stride, last), low)
    candidates = tf.ragged.range(low, high + 1)  # [words, (windows holding the word)]
    k, word = candidates.flat_values, candidates.value_rowids()
    at, end = tf.gather(first, word), tf.gather(last, word)
    unlimited = tf.constant(UNCAPPED, tf.int64)
    before = tf.where(k > 0, at - k * stride, unlimited)
    after = tf.where(k < end, k * stride + budget - 1 - at, unlimited)
    context = tf.minimum(before, after)
    words = tf.shape(first, out_type=tf.int64)[0]
    most = tf.math.unsorted_segment_max(context, word, words)
    chosen = tf.math.unsorted_segment_min(tf.where(tf.equal(context, tf.gather(most, word)), k, unlimited), word, words)
    return (first_pieces.with_flat_values(chosen), first_pieces.with_flat_values(first - chosen * stride))
