"""What every native preprocessor shares: packing one or two token segments into model inputs
(a family's special tokens, Hugging Face's truncation), the long-text cutters, and the layer over
a subword tokenizer module. The tokenizers themselves are in tokenizers/, one module per algorithm.

A preprocessor offers the TF-Hub preprocessor interface
(https://www.tensorflow.org/hub/common_saved_model_apis/text): `tokenize(strings)`,
`bert_pack_inputs(segments, seq_length=...)` and `__call__(strings)`, so the trainer treats it and
a TF-Hub preprocess SavedModel alike, and a model can take raw strings.
"""

import dataclasses
from collections.abc import Sequence

import tensorflow as tf
import tensorflow_text as text
import tf_keras


@dataclasses.dataclass(frozen=True)
class SpecialTokens:
    """A family's special tokens and how it packs one or two texts.

    BERT: `[CLS] a [SEP] b [SEP]`, b's type ids 1. RoBERTa's layout (RoBERTa, XLM-R, MPNet):
    `<s> a </s></s> b </s>`, type ids all 0 (RoBERTa has one token type, MPNet none)."""

    pad: str
    unknown: str
    start: str
    end: str
    pair_separator: tuple[str, ...] = ()  # after a's end, before b
    typed_pairs: bool = True  # b's tokens get type id 1

    def names(self) -> tuple[str, ...]:
        return (self.pad, self.unknown, self.start, self.end)


def pack_segments(
    segments: Sequence[tf.RaggedTensor], seq_length: int, ids: dict[str, int], special: SpecialTokens
) -> dict[str, tf.Tensor]:
    """Token segments [B, (words), (pieces)] or [B, (pieces)] -> padded model inputs.

    Trimmed as Hugging Face trims (`trim_longest_first`), so that with the special tokens each
    row is at most seq_length long. `ids` maps each special token to its id."""
    tokens = [tf.cast(segment, tf.int32).merge_dims(1, -1) for segment in segments]
    separator = [ids[token] for token in special.pair_separator] if len(tokens) > 1 else []
    trimmed = trim_longest_first(tokens, seq_length - len(tokens) - 1 - len(separator))
    if separator:
        rows = trimmed[1].nrows(out_type=tf.int32)
        prefix = tf.RaggedTensor.from_tensor(tf.tile(tf.constant([separator], tf.int32), [rows, 1]))
        trimmed = [trimmed[0], tf.concat([prefix, trimmed[1]], axis=1)]
    word_ids, type_ids = text.combine_segments(
        trimmed, start_of_sequence_id=ids[special.start], end_of_segment_id=ids[special.end]
    )
    word_ids, mask = text.pad_model_inputs(word_ids, seq_length, pad_value=ids[special.pad])
    type_ids, _ = text.pad_model_inputs(type_ids, seq_length)
    if not special.typed_pairs:
        type_ids = tf.zeros_like(type_ids)
    return {
        "input_word_ids": tf.cast(word_ids, tf.int32),
        "input_mask": tf.cast(mask, tf.int32),
        "input_type_ids": tf.cast(type_ids, tf.int32),
    }


def trim_longest_first(tokens: list[tf.RaggedTensor], budget: int) -> list[tf.RaggedTensor]:
    """One or two token segments [B, (T)] cut to at most `budget` tokens per row together, as
    Hugging Face's fast tokenizers cut them ("longest_first"): each keeps its first
    `longest_first_shares` tokens."""
    lengths = [tf.cast(segment.row_lengths(), tf.int32) for segment in tokens]
    keep = longest_first_shares(lengths, budget)
    return [
        tf.ragged.boolean_mask(segment, tf.ragged.range(length) < tf.expand_dims(kept, 1))
        for segment, length, kept in zip(tokens, lengths, keep)
    ]


def longest_first_shares(lengths: list[tf.Tensor], budget) -> list[tf.Tensor]:
    """How many tokens each of one or two segments (int32 lengths [B] each) keeps within
    `budget` per row, as Hugging Face's "longest_first" truncation decides (tokenizers'
    utils/truncation.rs): a pair that does not fit loses tokens from its longer text only,
    until both are equally long; then each keeps half the budget, the longer (the second, on a
    tie) the odd token.

    TF-Text's RoundRobinTrimmer gives the odd token to the first text instead: one token off
    Hugging Face's ids for a pair cut to an odd budget.
    """
    if len(lengths) == 1:
        return [tf.minimum(lengths[0], budget)]
    if len(lengths) != 2:
        raise ValueError(f"one or two segments, not {len(lengths)}")
    first, second = lengths
    short, long = tf.minimum(first, second), tf.maximum(first, second)
    fits, halves = first + second <= budget, 2 * short > budget
    keep_short = tf.where(fits | ~halves, short, budget // 2)
    keep_long = tf.where(fits, long, tf.where(halves, budget - budget // 2, budget - short))
    first_longer = first > second
    return [tf.where(first_longer, keep_long, keep_short), tf.where(first_longer, keep_short, keep_long)]


def keep_head_and_tail(tokens: tf.RaggedTensor, budget) -> tf.RaggedTensor:
    """One segment's tokens [B, (words), (pieces)] or [B, (pieces)], a row longer than `budget`
    (a number, or one per row) cut to its first quarter and last three quarters of the budget;
    a shorter row is whole.

    --long-texts head-tail: the verdict of a review is often in its last lines, which a cut at
    the limit loses. Sun et al. 2019 ("How to Fine-Tune BERT for Text Classification", Table 3)
    found the first 128 and last 382 of 510 tokens best on IMDB. The result keeps the input's
    ragged rank (a kept piece becomes a word of its own), so a TF-Hub preprocessor's
    bert_pack_inputs, traced for [B, (words), (pieces)], takes it too."""
    pieces = tokens.merge_dims(1, -1) if tokens.ragged_rank > 1 else tokens
    lengths = pieces.row_lengths()
    budget = tf.broadcast_to(tf.cast(budget, lengths.dtype), tf.shape(lengths))
    head = budget // 4
    positions = tf.ragged.range(lengths)
    keep = (positions < tf.expand_dims(head, 1)) | (positions >= tf.expand_dims(lengths - (budget - head), 1))
    kept = tf.ragged.boolean_mask(pieces, keep)
    if tokens.ragged_rank == 1:
        return kept
    return kept.with_flat_values(
        tf.RaggedTensor.from_row_lengths(kept.flat_values, tf.ones_like(kept.flat_values, tf.int64))
    )


def window_counts(lengths, budget, overlap, max_windows):
    """How many windows of `budget` tokens, each overlapping the previous one by `overlap`,
    cover texts of `lengths` tokens, at most `max_windows` (at least one, for an empty text)."""
    stride = budget - overlap
    needed = 1 + (tf.maximum(lengths - budget, 0) + stride - 1) // stride
    return tf.minimum(needed, max_windows)


def split_into_windows(tokens: tf.RaggedTensor, budget: int, overlap: int, max_windows: int):
    """(windows [W, (words), (pieces)], windows per text [B] int64) of one segment's tokens
    [B, (words), (pieces)] or [B, (pieces)]: each text's pieces in windows of at most `budget`,
    consecutive windows sharing `overlap` pieces, at most `max_windows` per text (its end is lost
    past them). --long-texts windows: every window is packed and encoded on its own, and the
    model pools them (trainer.modeling.windows). The windows keep the input's ragged rank, as
    keep_head_and_tail's result does."""
    pieces = tokens.merge_dims(1, -1) if tokens.ragged_rank > 1 else tokens
    lengths = pieces.row_lengths()
    budget = tf.cast(budget, lengths.dtype)
    counts = window_counts(lengths, budget, overlap, max_windows)
    # Window j of a text starts at j * stride; its pieces are [start, min(start + budget, length)).
    starts = tf.ragged.range(counts) * (budget - overlap)
    ends = tf.minimum(starts + budget, tf.expand_dims(lengths, 1))
    offsets = tf.expand_dims(pieces.row_starts(), 1)
    indices = tf.ragged.range((starts + offsets).flat_values, (ends + offsets).flat_values)
    windows = tf.gather(pieces.flat_values, indices)
    if tokens.ragged_rank > 1:
        windows = windows.with_flat_values(
            tf.RaggedTensor.from_row_lengths(windows.flat_values, tf.ones_like(windows.flat_values, tf.int64))
        )
    return windows, counts


class PackingPreprocessor(tf_keras.layers.Layer):
    """The packing half of the preprocessor interface, for a subclass with `tokenize`,
    `seq_length`, `special` (SpecialTokens) and `special_ids` (each of them -> its id)."""

    def bert_pack_inputs(self, segments: list[tf.RaggedTensor], seq_length: int | None = None) -> dict[str, tf.Tensor]:
        """`[CLS] a [SEP] (b [SEP])` (or the family's layout), trimmed longest first to fit,
        padded to seq_length."""
        seq_length = self.seq_length if seq_length is None else seq_length
        return pack_segments(segments, seq_length, self.special_ids, self.special)

    def call(self, strings):
        return self.bert_pack_inputs([self.tokenize(strings)])

    def tokenize_words(self, words: tf.Tensor) -> tf.RaggedTensor:
        """[N] words -> int32 [N, (pieces)]: each word's pieces as Hugging Face gives them for
        words passed with `is_split_into_words=True` (token classification)."""
        pieces = self.tokenize(words)
        return pieces.merge_dims(1, -1) if pieces.ragged_rank > 1 else pieces


class SubwordPreprocessor(PackingPreprocessor):
    """The preprocessor interface (`__call__`, `tokenize`, `bert_pack_inputs`) over a subword
    tokenizer module of tokenizers/ (byte-level BPE, SentencePiece): its `tokenize` gives
    Hugging Face's ids without special tokens; this layer adds the family's, as `special` says.

    The tokenizer is a tf.Module, tracked as an attribute, so its tables are saved with any
    SavedModel that holds this layer; `assets` are its source files, shipped beside it.
    """

    def __init__(self, tokenizer, special: SpecialTokens, seq_length: int = 128, **kwargs):
        kwargs["trainable"] = False
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.special = special
        self.seq_length = seq_length
        self.vocab_size = tokenizer.vocab_size
        self.special_ids = {
            token: tokenizer.token_to_id(token) for token in (*special.names(), *special.pair_separator)
        }
        assets = getattr(tokenizer, "assets", None)
        self.assets = list(assets) if assets is not None else [tokenizer.model_asset]

    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """[B] strings -> int32 RaggedTensor [B, (tokens)]."""
        return self.tokenizer.tokenize(strings)

    def tokenize_words(self, words: tf.Tensor) -> tf.RaggedTensor:
        """Each word after the tokenizer's `word_prefix`: byte-level BPE reads a word after a
        space as in running text (Hugging Face's `add_prefix_space=True`, which words given with
        `is_split_into_words=True` require)."""
        prefix = self.tokenizer.word_prefix
        return self.tokenize(tf.strings.join([prefix, words]) if prefix else words)
