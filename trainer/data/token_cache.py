"""The token cache: every split tokenized once into block files on disk, then read as a stream.

Texts never sit in memory whole: the files are read again chunk by chunk (the rows each split
keeps were decided by `splits.load_datasets`), tokenized in one tf.data pipeline (one trace of
the tokenizer, parallel calls), and written as blocks of `BLOCK_ROWS` consecutive rows. Training
reads the blocks of a split in a seeded order, a few at a time, through a shuffle buffer, so
memory and the dataset graph stay the same size for a thousand rows or ten million.

A cache directory is named by a hash of everything its tokens depend on: the files (path, size,
modification time), the rows and labels of each split, the columns, and the tokenizer's output
on probe texts. Epochs, resumed runs and tuning trials on the same data and tokenizer find it
and skip tokenizing; `meta.json`, written last, marks it complete.
"""

import dataclasses
import hashlib
import io
import json
import logging
import time

import numpy as np
import tensorflow as tf

from trainer import progress, storage
from trainer.data.input_pipeline import LongTexts, Rows

log = logging.getLogger("trainer")

BLOCK_ROWS = 4096
_TOKENIZE_BATCH = 1024
_INTERLEAVED_BLOCKS = 16  # blocks read at once: a shuffle buffer draws from this many places
_SHUFFLE_ROWS = 65_536
# Texts on which tokenizers are known to differ: case and accents, emoji, an empty text, and a
# no-break space (TF-Text's BertTokenizer and FastBertTokenizer split it differently when cased).
_PROBES = (
    "The quick brown fox jumps over the lazy dog.",
    "Ünïcödé, emoji 🙂 and CAPS!",
    "",
    "no\u00a0break ﬁne…",
    # what WordPiece read differently before issue #66: control and format characters, Σ
    "soft\u00adhyphen, ΟΔΥΣΣΕΥΣ\x00after a NUL",
)


@dataclasses.dataclass
class CachedSplit(Rows):
    """One split's tokens on disk; lengths and labels (in block order) in memory."""

    blocks: list  # block file paths, in row order
    lengths: np.ndarray  # int32 [N]
    labels: np.ndarray  # int32 [N], float32 [N] or [N, L]
    class_weights: np.ndarray | None = None  # per-class example weights, or None: all 1
    full_lengths: np.ndarray | None = None  # int32 [N]: each row's length before the cut

    def examples(self, seed=None, shard=(0, 1)) -> tf.data.Dataset:
        """Rows as (features, label, weight), with ragged token ids: in order, or (with a seed)
        blocks in a seeded order interleaved through a shuffle buffer. `shard` (index, count):
        this worker's share, whole blocks when there are enough, else every count-th row."""
        index, count = shard
        by_block = len(self.blocks) >= count
        files = tf.data.Dataset.from_tensor_slices(self.blocks[index::count] if by_block else self.blocks)
        if seed is not None:
            files = files.shuffle(max(1, len(self.blocks)), seed=seed)
        read = files.map(self._read_block, num_parallel_calls=tf.data.AUTOTUNE)
        rows = read.interleave(
            lambda *block: tf.data.Dataset.from_tensor_slices(block),
            cycle_length=1 if seed is None else _INTERLEAVED_BLOCKS,
        )
        if not by_block:
            rows = rows.shard(count, index)
        if seed is not None:
            rows = rows.shuffle(min(max(1, len(self)), _SHUFFLE_ROWS), seed=seed)
        return rows

    def take(self, rows: np.ndarray) -> "CachedRows":
        """Some rows of the split (ascending indices), e.g. a sample to evaluate."""
        return CachedRows(self, np.asarray(rows, np.int64))

    def _read_block(self, path):
        parts = tf.io.parse_tensor(tf.io.read_file(path), tf.string)
        word_ids, type_ids, lengths = (
            tf.ensure_shape(tf.io.parse_tensor(parts[i], tf.int32), [None]) for i in range(3)
        )
        labels = tf.io.parse_tensor(parts[3], tf.as_dtype(self.labels.dtype))
        labels = tf.ensure_shape(labels, [None, *self.labels.shape[1:]])
        if self.class_weights is None:
            weights = tf.ones(tf.shape(lengths), tf.float32)
        else:
            weights = tf.gather(tf.constant(self.class_weights, tf.float32), labels)
        ragged = lambda flat: tf.RaggedTensor.from_row_lengths(flat, lengths)  # noqa: E731
        return (
            {"input_word_ids": ragged(word_ids), "input_type_ids": ragged(type_ids), "length": lengths},
            labels,
            weights,
        )


@dataclasses.dataclass
class CachedRows:
    """Rows `rows` of a CachedSplit, read by filtering its stream (their blocks are scattered)."""

    split: CachedSplit
    rows: np.ndarray  # int64, ascending

    def __len__(self):
        return len(self.rows)

    @property
    def lengths(self) -> np.ndarray:
        return self.split.lengths[self.rows]

    @property
    def full_lengths(self) -> np.ndarray:
        return self.split.full_lengths[self.rows]

    @property
    def real_tokens(self) -> int:
        return int(self.lengths.sum())

    def examples(self, seed=None, shard=(0, 1)) -> tf.data.Dataset:
        """In row order; with a seed, through a shuffle buffer as CachedSplit's (a cross-fitting
        fold trains on such rows: trainer.training.cross_fit)."""
        wanted = tf.constant(self.rows)
        last = len(self.rows) - 1

        def chosen(index, _):
            position = tf.minimum(tf.searchsorted(wanted, tf.reshape(index, [1]))[0], last)
            return tf.gather(wanted, position) == index

        rows = self.split.examples().enumerate().filter(chosen).map(lambda _, row: row)
        if seed is not None:
            rows = rows.shuffle(min(max(1, len(self)), _SHUFFLE_ROWS), seed=seed)
        return rows


def tokenizer_fingerprint(preprocessor, pairs: bool) -> str:
    """A hash of the tokenizer's output on fixed probes: equal tokenizers, equal caches."""
    from trainer.data.input_pipeline import encode

    probes = tf.constant(_PROBES)
    features = encode(preprocessor, probes, probes if pairs else None)
    digest = hashlib.sha256()
    for name in sorted(features):
        digest.update(np.asarray(features[name]).tobytes())
    return digest.hexdigest()[:16]


def cache_key(datasets, tokenizer: str, max_seq_length: int, long_texts="truncate") -> str:
    """A hash of what the tokens depend on (see the module docstring)."""
    digest = hashlib.sha256(
        json.dumps(
            {
                "format": 2,  # 2: full_lengths.npy beside lengths.npy
                "columns": datasets.text_columns(),
                "tokenizer": tokenizer,
                "length": max_seq_length,
                "long_texts": LongTexts.of(long_texts).key(),
                "files": {name: _file_identity(split.spec) for name, split in datasets.splits().items()},
            },
            sort_keys=True,
        ).encode()
    )
    for name, split in datasets.splits().items():
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(split.positions).tobytes())
        digest.update(np.ascontiguousarray(split.labels).tobytes())
    return digest.hexdigest()[:20]


def _file_identity(spec: str) -> list:
    stats = []
    for path in storage.expand_paths(spec, "--training-file"):
        stats.append([path, *storage.identity(path)])
    return stats


def load_or_build(
    datasets,
    preprocessor,
    root: str,
    max_seq_length: int,
    class_weights: np.ndarray | None = None,
    log_every_seconds: float = 30.0,
    build: bool = True,
    wait_seconds: float = 6 * 3600,
    long_texts="truncate",
) -> dict[str, CachedSplit]:
    """{split: CachedSplit} from `root`/<key>: found complete, else tokenized now; with
    `build` False (a worker other than the chief), waited for while the chief tokenizes.
    `long_texts`: --long-texts, a mode or a input_pipeline.LongTexts (input_pipeline.pack_tokens)."""
    tokenizer = tokenizer_fingerprint(preprocessor, datasets.text_pair_column is not None)
    directory = storage.join(root, cache_key(datasets, tokenizer, max_seq_length, long_texts))
    meta_path = storage.join(directory, "meta.json")
    if not build and not storage.exists(meta_path):
        wait_for(meta_path, wait_seconds, "token cache")
    if storage.exists(meta_path):
        meta = json.loads(storage.read_text(meta_path))
        log.info("token cache: reusing %s", directory)
    else:
        # Built aside and moved into place whole: tuning trials started together may each
        # build it; the first to finish publishes, the others drop their copy.
        building = storage.temporary_sibling(directory)
        meta = _build(datasets, preprocessor, building, log_every_seconds, long_texts)
        storage.write_text_atomic(storage.join(building, "meta.json"), json.dumps(meta))
        if storage.exists(meta_path):
            storage.remove(building)
        else:
            storage.replace_directory(building, directory)
        log.info("token cache: %s", directory)
    out = {}
    for name, split in datasets.splits().items():
        blocks = [storage.join(directory, f"{name}/{i:06d}.block") for i in range(meta[name]["blocks"])]
        lengths, full = (
            np.load(_local(storage.join(directory, f"{name}/{array}.npy"))) for array in ("lengths", "full_lengths")
        )
        out[name] = CachedSplit(blocks, lengths, split.labels, class_weights if name == "train" else None, full)
    return out


def wait_for(path: str, seconds: float, what: str) -> None:
    """Waits for a file the chief writes (the token cache's meta.json, the teacher's outputs)."""
    from trainer.errors import UserError

    log.info("%s: waiting for the chief to write %s", what, path)
    deadline = time.monotonic() + seconds
    while not storage.exists(path):
        if time.monotonic() > deadline:
            raise UserError(
                f"{what}: {path} did not appear within {seconds:.0f}s; the chief "
                f"writes it, so every worker needs the same job dir or --cache-dir"
            )
        time.sleep(1.0)


def _local(path: str):
    return io.BytesIO(storage.read_bytes(path))


def _build(datasets, preprocessor, directory: str, log_every_seconds: float, long_texts) -> dict:
    """Tokenizes every split into `directory`; returns meta.json's content."""
    start, total = time.perf_counter(), sum(len(split) for split in datasets.splits().values())
    meter, done = progress.Progress("tokenized", log_every_seconds, total=total), 0
    writers = {
        name: _BlockWriter(storage.join(directory, name), split.labels) for name, split in datasets.splits().items()
    }
    batches = _tokenized_batches(datasets, preprocessor, long_texts)
    for name, source, word_ids, type_ids, lengths, full in batches:
        writers[name].add(source, word_ids, type_ids, lengths, full)
        done += len(lengths)
        meter.update(done)
    meta = {name: writer.close() for name, writer in writers.items()}
    log.info("token cache: %d rows tokenized in %.1fs", total, time.perf_counter() - start)
    return meta


def _tokenized_batches(datasets, preprocessor, long_texts):
    """(split name, source file number, flat word ids, flat type ids, lengths, full lengths) of
    every split's rows in order, from one tf.data pipeline fed by a reader thread (the files are
    read once per distinct spec); a row's texts are its text columns' (Datasets.text_columns)."""
    names, columns = list(datasets.splits()), datasets.text_columns()

    def batches():
        by_spec, files = {}, {}
        for name, split in datasets.splits().items():
            by_spec.setdefault(split.spec, {})[name] = split.positions
        for spec, positions in by_spec.items():
            for name, chunk in datasets.selected_chunks(spec, positions):
                source = files.setdefault(chunk["_file"].iloc[0], len(files))
                texts = [[str(t) for t in chunk[column]] for column in columns]
                for i in range(0, len(chunk), _TOKENIZE_BATCH):
                    yield (names.index(name), source, *(part[i : i + _TOKENIZE_BATCH] for part in texts))

    strings = (tf.TensorSpec([None], tf.string),) * len(columns)
    dataset = tf.data.Dataset.from_generator(
        batches, output_signature=(tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32), *strings)
    )
    # Traced as written, not converted by AutoGraph: packing has no Python control flow on
    # tensors, and converting TF-Text's functions cost about 3 s of a tiny run's 34.
    tokens = dataset.map(
        tf.autograph.experimental.do_not_convert(
            lambda split, source, *texts: (split, source, *_packed(preprocessor, texts, long_texts))
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    ).prefetch(4)
    # Within a split, rows come back in row order: the order of the labels kept in memory.
    for split, source, word_ids, type_ids, lengths, full in tokens.as_numpy_iterator():
        yield names[split], int(source), word_ids, type_ids, lengths, full


def _packed(preprocessor, texts: tuple, long_texts):
    """pack_tokens of a batch's (text,), (text, pair) or (text, pair, hard negative)."""
    from trainer.data.input_pipeline import pack_tokens

    text, pair, negative = (*texts, None, None)[:3]
    return pack_tokens(preprocessor, text, pair, long_texts, negatives=negative)


class _BlockWriter:
    """Collects one split's tokenized rows and writes them as blocks of BLOCK_ROWS rows; a
    block never spans two source files, so workers can share out a split's files."""

    def __init__(self, directory: str, labels: np.ndarray):
        self.directory, self.labels = directory, labels
        self.pending = [np.zeros([0], np.int32)] * 3  # word ids, type ids, lengths not yet written
        self.lengths, self.full_lengths, self.rows_written, self.blocks, self.source = [], [], 0, 0, None
        storage.makedirs(directory)

    def add(self, source: int, word_ids, type_ids, lengths, full_lengths):
        if source != self.source and len(self.pending[2]):
            self._write(len(self.pending[2]))
        self.source = source
        self.pending = [np.concatenate([old, new]) for old, new in zip(self.pending, (word_ids, type_ids, lengths))]
        self.lengths.append(lengths)
        self.full_lengths.append(full_lengths)
        while len(self.pending[2]) >= BLOCK_ROWS:
            self._write(BLOCK_ROWS)

    def _write(self, rows: int):
        word_ids, type_ids, lengths = self.pending
        tokens = int(lengths[:rows].sum())
        labels = self.labels[self.rows_written : self.rows_written + rows]
        parts = [tf.io.serialize_tensor(x) for x in (word_ids[:tokens], type_ids[:tokens], lengths[:rows], labels)]
        block = storage.join(self.directory, f"{self.blocks:06d}.block")
        storage.write_bytes_atomic(block, tf.io.serialize_tensor(tf.stack(parts)).numpy())
        self.pending = [word_ids[tokens:], type_ids[tokens:], lengths[rows:]]
        self.rows_written += rows
        self.blocks += 1

    def close(self) -> dict:
        if len(self.pending[2]):
            self._write(len(self.pending[2]))
        arrays = {
            name: np.concatenate(parts).astype(np.int32) if parts else np.zeros([0], np.int32)
            for name, parts in (("lengths", self.lengths), ("full_lengths", self.full_lengths))
        }
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, array)
            storage.write_bytes_atomic(storage.join(self.directory, f"{name}.npy"), buffer.getvalue())
        return {"blocks": self.blocks, "rows": int(len(arrays["lengths"])), "tokens": int(arrays["lengths"].sum())}
