"""Rotary position embeddings (RoFormer, arXiv:2104.09864) as Hugging Face's ModernBERT applies
them: each head's query and key are rotated by angles position * theta^(-2i/D), the two halves of
the head (not interleaved pairs) forming the planes (modeling_modernbert.py `rotate_half`).

Positions enter attention only through these rotations, so there is no position table and no
length limit in the weights: any T works, as length buckets and static shapes need.
"""

import numpy as np
import tensorflow as tf


def tables(length, head_size: int, theta: float):
    """(cos, sin), float32 [T, head_size], for positions 0..T-1.

    The inverse frequencies are computed in float32, as Hugging Face computes them, so the
    angles round as theirs do."""
    exponents = np.arange(0, head_size, 2, dtype=np.float32) / np.float32(head_size)
    inverse = tf.constant(np.float32(1.0) / np.float32(theta) ** exponents, tf.float32)
    angles = tf.expand_dims(tf.cast(tf.range(length), tf.float32), 1) * tf.expand_dims(inverse, 0)
    angles = tf.concat([angles, angles], axis=-1)
    return tf.cos(angles), tf.sin(angles)


def rotate(x, cos, sin):
    """x [B, T, heads, head_size] rotated by its positions' angles, computed in float32 (as
    Hugging Face does under any autocast) and returned in x's dtype."""
    x32 = tf.cast(x, tf.float32)
    half = x32.shape[-1] // 2
    rotated = tf.concat([-x32[..., half:], x32[..., :half]], axis=-1)
    cos, sin = tf.expand_dims(cos, 1), tf.expand_dims(sin, 1)  # [T, 1, D]: over heads
    return tf.cast(x32 * cos + rotated * sin, x.dtype)
