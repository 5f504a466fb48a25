"""tf.data input pipelines: tokenize once in the graph, then batch with little padding.

Texts are tokenized a whole batch at a time by the TF-Text preprocessor (never one example at a
time in Python) exactly once per split; the token ids are kept, unpadded, for every epoch.
Batches are then padded only to the next of a few fixed lengths (8, 12, 16, ..., 64, ...), so
tweets of ~25 tokens do not pay for 128, nor tagged sentences of ~13 for 16, and XLA programs see a
small, fixed set of shapes. On TPUs everything is padded to one static shape instead
(--sequence-padding fixed).
"""

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from trainer import progress
from trainer.data.padding import padded_lengths, padded_to  # noqa: F401  padded_lengths: callers' ladder
from trainer.modeling.encoders import preprocessing
from trainer.modeling.encoders.layers import INPUT_KEYS

_TOKENIZE_BATCH = 1024


@dataclasses.dataclass(frozen=True)
class LongTexts:
    """--long-texts and its window flags: what becomes of a single text longer than
    --max-seq-length, the same at training, prediction and serving."""

    mode: str = "truncate"  # truncate, head-tail or windows
    window_overlap: int = 0
    max_windows: int = 1
    # The texts of a row packed each alone, one after the other, each its side's number as its
    # type id (a bi-encoder's pair: 2, tasks/embedding), instead of together as [CLS] a [SEP] b
    # [SEP]; each is cut (or its head and tail kept) at --max-seq-length on its own.
    sides: int = 1

    @classmethod
    def of(cls, value) -> "LongTexts":
        """A LongTexts as is, or a mode's name with its window flags unset."""
        return value if isinstance(value, cls) else cls(value)

    @classmethod
    def from_config(cls, data) -> "LongTexts":
        """The run's, from its DataConfig."""
        if data.long_texts != "windows":
            return cls(data.long_texts)
        overlap = data.max_seq_length // 4 if data.window_overlap is None else data.window_overlap
        return cls("windows", overlap, data.max_windows)

    @property
    def windows(self) -> int:
        """Pieces of --max-seq-length tokens a row may hold (the padding ladder's multiples):
        --max-windows with windows (of each side, when packed each alone), its sides when
        packed each alone, else one."""
        return self.max_windows * self.sides if self.mode == "windows" else self.sides

    def key(self) -> str:
        """What the token cache depends on: the mode, with windows its flags, and the sides."""
        key = f"windows-{self.window_overlap}-{self.max_windows}" if self.mode == "windows" else self.mode
        return key if self.sides == 1 else f"{key}-sides-{self.sides}"


class Rows:
    """What a split of tokens (in memory, or in the token cache) answers from its `lengths`."""

    lengths: np.ndarray  # int32 [N]: each row's tokens

    def __len__(self):
        return len(self.lengths)

    @property
    def real_tokens(self) -> int:
        return int(self.lengths.sum())


@dataclasses.dataclass
class TokenizedSplit(Rows):
    """Token ids of one split, unpadded (row i has lengths[i] tokens), plus labels and weights."""

    word_ids: np.ndarray  # int32, all rows concatenated
    type_ids: np.ndarray  # int32, same layout
    lengths: np.ndarray  # int32 [N]
    labels: np.ndarray  # int32 [N] class ids, or float32 [N] regression targets
    weights: np.ndarray  # float32 [N]
    full_lengths: np.ndarray | None = None  # int32 [N]: each row's length before the cut

    def rows(self, start: int, stop: int) -> "TokenizedSplit":
        """Rows [start, stop): e.g. one split of several tokenized in a single pass."""
        offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        tokens = slice(offsets[start], offsets[stop])
        return TokenizedSplit(
            self.word_ids[tokens],
            self.type_ids[tokens],
            self.lengths[start:stop],
            self.labels[start:stop],
            self.weights[start:stop],
            None if self.full_lengths is None else self.full_lengths[start:stop],
        )

    def take(self, rows: np.ndarray) -> "TokenizedSplit":
        """Some rows of the split, e.g. a sample to evaluate."""
        return _take(self, np.asarray(rows, np.int64))

    def examples(self, seed=None, shard=(0, 1)) -> tf.data.Dataset:
        """Rows as (features, label, weight), with ragged token ids: in order, or shuffled
        whole with a seed; `shard` (index, count): every count-th row, from `index`."""
        ragged = lambda flat: tf.RaggedTensor.from_row_lengths(flat, self.lengths)  # noqa: E731
        rows = tf.data.Dataset.from_tensor_slices(
            (
                {
                    "input_word_ids": ragged(self.word_ids),
                    "input_type_ids": ragged(self.type_ids),
                    "length": self.lengths,
                },
                self.labels,
                self.weights,
            )
        ).shard(shard[1], shard[0])
        if seed is None:
            return rows
        return rows.shuffle(max(1, len(self)), seed=seed, reshuffle_each_iteration=False)


def encode(preprocessor, texts, pairs=None, long_texts="truncate") -> dict:
    """The preprocessor's features of texts, or of `[CLS] text [SEP] pair [SEP]` for pairs.

    bert_pack_inputs trims a pair as Hugging Face's "longest_first" does (preprocessing.
    trim_longest_first): a short side keeps every token and the longer side is cut first;
    cutting the second text first (TF-Text's WaterfallTrimmer) would lose its every word.
    A text longer than the limit loses its end (truncate) or its middle (head-tail; a pair's
    texts each the middle of their share), or (windows, single texts only) is [B, max_windows *
    seq_length] wide: its windows side by side, each padded to seq_length, with empty windows
    after its last one.
    """
    long_texts = LongTexts.of(long_texts)
    if pairs is None and long_texts.mode == "truncate":
        return preprocessor(texts)
    segments = [preprocessor.tokenize(texts)] + ([] if pairs is None else [preprocessor.tokenize(pairs)])
    if long_texts.mode != "windows":
        return preprocessor.bert_pack_inputs(cut(preprocessor, segments, long_texts))
    features, counts = _packed_windows(preprocessor, segments, long_texts)
    width = long_texts.max_windows * preprocessor.seq_length
    side_by_side = lambda t: tf.reshape(  # noqa: E731
        tf.RaggedTensor.from_row_lengths(t, counts).to_tensor(
            0, shape=[None, long_texts.max_windows, preprocessor.seq_length]
        ),
        [-1, width],
    )
    return {name: side_by_side(features[name]) for name in features}


def cut(preprocessor, segments: list, long_texts) -> list:
    """The token segments bert_pack_inputs packs: as they are (it cuts them to seq_length
    itself), or (head-tail) each text's first and last tokens. A pair shares the budget as
    truncation shares it, longest first (preprocessing.longest_first_shares), and each of its
    texts keeps the head and tail of its share."""
    mode = LongTexts.of(long_texts).mode
    if mode == "truncate":
        return segments
    if mode != "head-tail":
        raise ValueError(f"--long-texts {mode} is not a cut")
    budget = preprocessor.seq_length - special_count(preprocessor, len(segments))
    lengths = [tf.cast(_piece_counts(segment), tf.int32) for segment in segments]
    shares = preprocessing.longest_first_shares(lengths, budget)
    return [preprocessing.keep_head_and_tail(segment, share) for segment, share in zip(segments, shares)]


def _piece_counts(segment: tf.RaggedTensor) -> tf.Tensor:
    """Tokens per row of [B, (words), (pieces)] or [B, (pieces)]."""
    return segment.merge_dims(1, -1).row_lengths() if segment.ragged_rank > 1 else segment.row_lengths()


def _packed_windows(preprocessor, segments: list, long_texts: LongTexts):
    """(features [W, seq_length] of every window of every text, windows per text [B]): a
    text's windows are consecutive rows (preprocessing.split_into_windows)."""
    if len(segments) != 1:
        raise ValueError(f"--long-texts windows with {len(segments)} texts per row")
    budget = preprocessor.seq_length - special_count(preprocessor, 1)
    windows, counts = preprocessing.split_into_windows(
        segments[0], budget, long_texts.window_overlap, long_texts.max_windows
    )
    return preprocessor.bert_pack_inputs([windows]), counts


def pack_tokens(preprocessor, texts, pairs=None, long_texts="truncate", negatives=None):
    """(flat word ids, flat type ids, lengths, full lengths) of a batch: only the real tokens of
    each row, and how long each row would be uncut (its tokens and the special ones): a row whose
    full length passes the preprocessor's seq_length (--max-seq-length) was cut to it.

    With windows, a row's tokens are its packed windows one after another: all but the last
    are seq_length long, so padding the row to whole windows lines them up again. With sides
    (LongTexts.sides), its texts packed each alone one after another (_packed_sides): the text,
    its pair and, for embedding triplets, its hard negative (`negatives`).

    The texts are tokenized once: packing is what the preprocessor's __call__ does after
    `tokenize`, and the tokens before packing give the full length."""
    long_texts = LongTexts.of(long_texts)
    segments = [preprocessor.tokenize(part) for part in (texts, pairs, negatives) if part is not None]
    if long_texts.sides > 1:
        return _packed_sides(preprocessor, segments, long_texts)
    if long_texts.mode == "windows":
        features, counts = _packed_windows(preprocessor, segments, long_texts)
    else:
        features, counts = preprocessor.bert_pack_inputs(cut(preprocessor, segments, long_texts)), None
    mask = tf.cast(features["input_mask"], tf.bool)
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    if counts is not None:  # window lengths -> text lengths
        lengths = tf.reduce_sum(tf.RaggedTensor.from_row_lengths(lengths, counts), axis=1)

    def flat(name):
        return tf.ragged.boolean_mask(tf.cast(features[name], tf.int32), mask).flat_values

    return flat("input_word_ids"), flat("input_type_ids"), lengths, _full_lengths(preprocessor, segments)


def _packed_sides(preprocessor, segments: list, long_texts: LongTexts):
    """pack_tokens' four values of texts packed each alone ([CLS] a [SEP] [CLS] b [SEP]; with
    windows, each text's windows), the tokens of side s typed s; a row's full length is its
    longest side's (a side longer than --max-seq-length, or its windows, is what was cut)."""
    if len(segments) != long_texts.sides:
        raise ValueError(f"{len(segments)} texts per row packed as {long_texts.sides} sides")
    word_ids = [_side_tokens(preprocessor, segment, long_texts) for segment in segments]
    type_ids = [ids.with_flat_values(tf.fill(tf.shape(ids.flat_values), side)) for side, ids in enumerate(word_ids)]
    word_ids, type_ids = tf.concat(word_ids, axis=1), tf.concat(type_ids, axis=1)
    full = tf.reduce_max(tf.stack([_full_lengths(preprocessor, [s]) for s in segments]), axis=0)
    return word_ids.flat_values, type_ids.flat_values, tf.cast(word_ids.row_lengths(), tf.int32), full


def _side_tokens(preprocessor, segment, long_texts: LongTexts) -> tf.RaggedTensor:
    """The real token ids [B, (tokens)] int32 of one side's texts packed alone: with windows,
    each text's windows one after another (all but its last are seq_length tokens long, so a
    side padded to whole windows lines them up again)."""
    if long_texts.mode != "windows":
        features, counts = preprocessor.bert_pack_inputs(cut(preprocessor, [segment], long_texts)), None
    else:
        features, counts = _packed_windows(preprocessor, [segment], long_texts)
    mask = tf.cast(features["input_mask"], tf.bool)
    ids = tf.ragged.boolean_mask(tf.cast(features["input_word_ids"], tf.int32), mask)
    return ids if counts is None else tf.RaggedTensor.from_row_lengths(ids, counts).merge_dims(1, 2)


def _full_lengths(preprocessor, segments) -> tf.Tensor:
    """int32 [B]: each row's tokens over its segments, plus the special tokens packing adds."""
    content = tf.add_n([tf.cast(_piece_counts(s), tf.int32) for s in segments])
    return content + special_count(preprocessor, len(segments))


def special_count(preprocessor, segments: int) -> tf.Tensor:
    """The special tokens packing adds to a row of `segments` texts: as many as it adds to
    empty texts ([CLS] [SEP], or a family's own)."""
    empty = [preprocessor.tokenize(tf.constant([""])) for _ in range(segments)]
    return tf.reduce_sum(tf.cast(preprocessor.bert_pack_inputs(empty)["input_mask"], tf.int32))


def tokenize_splits(splits: dict, preprocessor, pairs: dict | None = None) -> dict:
    """{name: (texts, labels, weights or None)} -> {name: TokenizedSplit}, in one tf.data pass
    (each pipeline traces the tokenizer graph anew, about a second apiece). `pairs`: {name:
    second texts} of a sentence-pair task."""
    names = list(splits)
    texts = np.concatenate([np.asarray(splits[n][0], dtype=object) for n in names])
    second = None if pairs is None else np.concatenate([np.asarray(pairs[n], dtype=object) for n in names])
    labels = np.concatenate([_label_array(splits[n][1]) for n in names])
    weights = np.concatenate(
        [
            np.ones(len(splits[n][0]), np.float32) if splits[n][2] is None else np.asarray(splits[n][2], np.float32)
            for n in names
        ]
    )
    everything = tokenize(texts, preprocessor, labels, weights, pairs=second)
    bounds = np.cumsum([0] + [len(splits[n][0]) for n in names])
    return {n: everything.rows(bounds[i], bounds[i + 1]) for i, n in enumerate(names)}


def tokenize(
    texts: Sequence[str],
    preprocessor,
    labels=None,
    weights=None,
    log_every_seconds: float = 30.0,
    pairs: Sequence[str] | None = None,
    long_texts="truncate",
) -> TokenizedSplit:
    """Runs the preprocessor over all texts (and pairs), batched in tf.data, and keeps only real
    tokens: a pair's length, which buckets it, is that of both texts packed together.

    Large inputs (minutes of tokenizing) log a progress line every `log_every_seconds`.
    """
    texts = np.asarray(texts, dtype=object)
    n = len(texts)
    labels = np.zeros(n, np.int32) if labels is None else _label_array(labels)
    weights = np.ones(n, np.float32) if weights is None else np.asarray(weights, np.float32)

    pack = lambda batch, second=None: pack_tokens(preprocessor, batch, second, long_texts)  # noqa: E731
    word_ids, type_ids, lengths = [], [], []
    strings = lambda values: np.asarray(values, dtype=object).astype(str) if n else np.zeros([0], str)  # noqa: E731
    slices = strings(texts) if pairs is None else (strings(texts), strings(pairs))
    dataset = (
        tf.data.Dataset.from_tensor_slices(slices)
        .batch(_TOKENIZE_BATCH)
        .map(tf.autograph.experimental.do_not_convert(pack), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    meter, done = progress.Progress("tokenized", log_every_seconds, total=n), 0
    for w, t, n, _ in dataset.as_numpy_iterator():
        word_ids.append(w), type_ids.append(t), lengths.append(n)
        done += len(n)
        meter.update(done)
    cat = lambda parts: np.concatenate(parts).astype(np.int32) if parts else np.zeros([0], np.int32)  # noqa: E731
    return TokenizedSplit(cat(word_ids), cat(type_ids), cat(lengths), labels, weights)


def _label_array(labels) -> np.ndarray:
    """Class ids as int32, regression targets (floats) as float32."""
    labels = np.asarray(labels)
    return labels.astype(np.float32 if labels.dtype.kind == "f" else np.int32)


@dataclasses.dataclass(frozen=True)
class Batching:
    batch_size: int  # global batch
    lengths: tuple  # padded_lengths(max_seq_length)
    bucket: bool  # group similar lengths; else pad every batch to the maximum length
    drop_remainder: bool = False  # static batch dimension (TPU training)
    # Training rows in runs of this many of one label (label_groups; 1: as shuffled), batched
    # in order (with `bucket`, each batch padded to the shortest length that fits it, without
    # length buckets): a task whose loss needs several texts of a label in a batch
    # (Task.rows_per_label).
    rows_per_label: int = 1
    # Texts per row packed each alone, cut at --max-seq-length (LongTexts.sides; 1 with windows):
    # with `bucket`, rows are grouped by `sides` times their longest text, the width a bi-encoder
    # pads every side of the batch to (tasks/embedding/model.SplitSides), not by their total
    # tokens: on STS-B's training pairs, 14% more tokens than the real ones encoded against 25%.
    sides: int = 1

    def steps(self, split: TokenizedSplit) -> int:
        """Batches per pass over `split`: exact, since bucket membership depends only on length."""
        if not self.bucket or self.rows_per_label > 1:
            sizes = [len(split)]
        else:
            sizes = np.unique(padded_to(self.bucket_lengths(split), self.lengths), return_counts=True)[1]
        count = (lambda s: s // self.batch_size) if self.drop_remainder else (lambda s: -(-s // self.batch_size))
        return int(sum(count(int(s)) for s in sizes))

    def bucket_lengths(self, split) -> np.ndarray:
        """Each row's length as its bucket is chosen: its tokens, or with sides `sides` times its
        longest text (the longest side's full length, cut at --max-seq-length)."""
        if self.sides == 1:
            return split.lengths
        return self.sides * np.minimum(split.full_lengths, self.lengths[-1] // self.sides)

    def bucket_length(self, features) -> tf.Tensor:
        """bucket_lengths of one row in tf.data, from its tokens (a side's: its type id)."""
        if self.sides == 1:
            return features["length"]
        return self.sides * tf.reduce_max(tf.math.bincount(features["input_type_ids"], minlength=self.sides))


def _pad_batch(lengths: tuple, static_batch: int | None = None):
    """Pads a batch of ragged rows to the shortest allowed length that fits them all.

    With a single allowed length (fixed padding) the shapes are static, as TPUs need.
    """
    allowed = tf.constant(lengths, tf.int32)

    def pad(features, labels, weights):
        if len(lengths) == 1:
            target, shape = lengths[0], [static_batch, lengths[0]]
        else:
            longest = tf.reduce_max(features["length"])
            target = tf.reduce_min(tf.boolean_mask(allowed, allowed >= longest))
            shape = tf.stack([tf.cast(features["input_word_ids"].nrows(), tf.int32), target])
        word_ids = features["input_word_ids"].to_tensor(0, shape=shape)
        type_ids = features["input_type_ids"].to_tensor(0, shape=shape)
        mask = tf.sequence_mask(features["length"], target, dtype=tf.int32)
        if static_batch:
            labels, weights, mask = (
                tf.ensure_shape(labels, [static_batch, *labels.shape[1:]]),
                tf.ensure_shape(weights, [static_batch]),
                tf.ensure_shape(mask, shape),
            )
        padded = {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}
        if "row" in features:  # evaluation: where each prediction goes (evaluation_dataset)
            padded["row"] = tf.ensure_shape(features["row"], [static_batch]) if static_batch else features["row"]
        return padded, labels, weights

    return pad


def _batched(examples: tf.data.Dataset, batching: Batching) -> tf.data.Dataset:
    # ragged_batch: rows of token ids are ragged whether they come from a RaggedTensor's slices
    # or, after a map, as tensors of different lengths.
    if batching.bucket and batching.rows_per_label > 1:  # runs of a label: batched in order, each padded apart
        return examples.ragged_batch(batching.batch_size, drop_remainder=batching.drop_remainder).map(
            _pad_batch(batching.lengths), num_parallel_calls=tf.data.AUTOTUNE
        )
    if batching.bucket:
        # Dataset.bucket_by_sequence_length pads dense rows; grouping by hand keeps rows ragged
        # until _pad_batch knows the batch's target length.
        limits = tf.constant(batching.lengths, tf.int32)

        def bucket_of(features, *_):
            return tf.reduce_min(tf.where(limits >= batching.bucket_length(features)))

        batched = examples.group_by_window(
            key_func=bucket_of,
            reduce_func=lambda _, rows: rows.ragged_batch(batching.batch_size, drop_remainder=batching.drop_remainder),
            window_size=batching.batch_size,
        )
        return batched.map(_pad_batch(batching.lengths), num_parallel_calls=tf.data.AUTOTUNE)
    static_batch = batching.batch_size if batching.drop_remainder else None
    return examples.ragged_batch(batching.batch_size, drop_remainder=batching.drop_remainder).map(
        _pad_batch(batching.lengths[-1:], static_batch), num_parallel_calls=tf.data.AUTOTUNE
    )


def _with_options(dataset: tf.data.Dataset) -> tf.data.Dataset:
    options = tf.data.Options()
    # Evaluation rows are sharded by element across workers (the AUTO policy would try FILE
    # first and log a warning on every worker); training input is sharded by the trainer.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    return dataset.with_options(options)


def training_dataset(
    split,
    batching: Batching,
    *,
    seed: int,
    first_epoch: int,
    epochs: int,
    shard=(0, 1),
    steps_per_epoch: int | None = None,
    accumulate: int = 1,
) -> tf.data.Dataset:
    """Epochs first_epoch..epochs-1 of `split` (a TokenizedSplit or token_cache.CachedSplit), each
    shuffled with its own seed; with `accumulate` k > 1, as groups of k batches (`grouped`).

    Seeding per epoch (rather than relying on reshuffle_each_iteration) makes a resumed run see
    exactly the batches an uninterrupted run would have seen from that epoch on. A worker that
    reads one `shard` of the data repeats it to `steps_per_epoch` batches, so that every worker
    takes the same number of steps.
    """

    def epoch(index):
        examples = split.examples(seed=index * 1_000_003 + seed, shard=shard)
        if batching.rows_per_label > 1:
            examples = label_groups(examples, batching.rows_per_label)
        batches = _batched(examples, batching)
        batches = batches if steps_per_epoch is None else batches.repeat().take(steps_per_epoch)
        return grouped(batches, accumulate, batching.drop_remainder) if accumulate > 1 else batches

    # Epochs chained in Python, each shuffled with a Python int seed: a seed computed from a
    # tensor (Dataset.range(...).flat_map) fails in tf.data's seed handling when the global seed
    # is 0, i.e. `--seed 0` (TensorFlow compares the seed pair with (0, 0) in Python).
    dataset = epoch(first_epoch)
    for index in range(first_epoch + 1, epochs):
        dataset = dataset.concatenate(epoch(index))
    return _with_options(dataset.prefetch(tf.data.AUTOTUNE))


def label_groups(examples: tf.data.Dataset, size: int) -> tf.data.Dataset:
    """The shuffled rows regrouped into runs of `size` rows of one label, each run as soon as the
    shuffled order has filled it (a label's last run at the end, shorter): batched in order, a
    batch of B rows holds about B / size labels with `size` texts each (a batch sampler by label,
    as sentence-transformers' GroupByLabelBatchSampler, but seeded per epoch like the rest).
    Length buckets would split the runs: a Batching with rows_per_label pads each batch alone."""
    return examples.group_by_window(
        # A label's first value: the class, also of a distilled row's packed targets (-1 unlabelled).
        key_func=lambda features, label, weight: tf.cast(tf.reshape(label, [-1])[0], tf.int64),
        reduce_func=lambda _, rows: rows,
        window_size=size,
    )


def grouped(batches: tf.data.Dataset, k: int, static: bool = False) -> tf.data.Dataset:
    """Tuples of `k` consecutive batches: one optimizer step each (--gradient-accumulation-steps,
    heads.Classifier.train_step). A short last group is completed with batches that add
    nothing: of 0 rows, or with static shapes (TPU) copies of its first batch with weight 0."""

    def nothing(features, labels, weights):
        if static:
            return features, labels, tf.zeros_like(weights)
        return tf.nest.map_structure(lambda t: t[:0], (features, labels, weights))

    def group(*window):
        rows = tf.data.Dataset.zip(window)
        filled = rows.concatenate(rows.take(1).map(nothing).repeat()).take(k)
        return tuple(filled.skip(j).take(1).get_single_element() for j in range(k))

    return batches.window(k).map(group)


def evaluation_dataset(split, batching: Batching, pad_to_full_batches: bool = False) -> tf.data.Dataset:
    """Every example exactly once, with its row number as feature "row": length buckets reorder
    the rows, and predictions are put back in the split's order by it (the report pairs them with
    the texts). With `pad_to_full_batches` (TPU), every batch has the static
    shape [batch, max length]: the last one is filled with weight-0 copies of the first row
    that metrics ignore, and a split that is a multiple of the batch needs no filler but still
    gets the static batch dimension.

    The number of batches is declared: Keras cannot predict with steps_per_execution > 1 from a
    dataset of unknown size (length buckets make it unknown to tf.data).
    """
    examples = split.examples().enumerate().map(_numbered)
    if not pad_to_full_batches:
        batched = _batched(examples, batching)
        return _with_options(
            batched.apply(tf.data.experimental.assert_cardinality(batching.steps(split))).prefetch(tf.data.AUTOTUNE)
        )
    size, rows = batching.batch_size, len(split)
    filler = -rows % size
    batching = dataclasses.replace(batching, drop_remainder=True, bucket=False)

    def weigh_filler(index, batch):
        # Filler rows are the last ones of the last batch: weight 0.
        features, labels, weights = batch
        real = index * size + tf.range(size, dtype=tf.int64) < rows
        return features, labels, tf.where(real, weights, 0.0)

    batched = (
        _batched(examples.concatenate(examples.take(1).repeat(filler)), batching)
        .enumerate()
        .map(weigh_filler)
        .apply(tf.data.experimental.assert_cardinality((rows + filler) // size))
    )
    return _with_options(batched.prefetch(tf.data.AUTOTUNE))


def _numbered(row, example):
    features, labels, weights = example
    return {**features, "row": row}, labels, weights


def _take(split: TokenizedSplit, rows: np.ndarray) -> TokenizedSplit:
    starts = np.concatenate([[0], np.cumsum(split.lengths)[:-1]]).astype(np.int64)
    pieces = [np.arange(starts[r], starts[r] + split.lengths[r]) for r in rows]
    flat = np.concatenate(pieces) if pieces else np.zeros([0], np.int64)
    full = None if split.full_lengths is None else split.full_lengths[rows]
    return TokenizedSplit(
        split.word_ids[flat], split.type_ids[flat], split.lengths[rows], split.labels[rows], split.weights[rows], full
    )


def trim_to_padded_length(features: dict, lengths: Sequence[int]) -> dict:
    """In a serving graph: cut preprocessor output (padded to the maximum) to the batch's need."""
    allowed = tf.constant(tuple(lengths), tf.int32)
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=1))
    target = tf.reduce_min(tf.boolean_mask(allowed, allowed >= longest))
    return {name: tf.cast(features[name][:, :target], tf.int32) for name in INPUT_KEYS}
