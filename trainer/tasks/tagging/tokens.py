"""Tagged sentences as model inputs: each word split by the family's tokenizer
(modeling.encoders.word_pieces), its tag id on its first piece and -1 on every other token, so
a split's labels line up with its tokens ([N, max_seq_length] int32) and batch, bucket and
shard as a sentence task's do (input_pipeline.TokenizedSplit).

A sentence whose pieces outnumber --max-seq-length loses the words past it: they are neither
trained on nor scored, and the log counts the sentences and their words per split (metrics.json's
truncated_texts the sentences), as the sentence tasks count the texts they cut (11 of WikiANN's
30,000 sentences and none of WNUT-17's exceed 128 tokens of the default encoder: a cut
counted, rather than overlapping windows). The export reads every word of a text of any length,
in windows (tasks/tagging/export.py). A word the tokenizer gives no piece (a lone control character
or zero-width space) is untagged too, and counted apart.
"""

import dataclasses
import logging

import numpy as np
import tensorflow as tf

from trainer import progress
from trainer.data.input_pipeline import TokenizedSplit, special_count
from trainer.tasks.tagging import distill
from trainer.tasks.tagging.distill import tag_ids
from trainer.tasks.tagging.tags import UNTAGGED
from trainer.tasks.tagging.word_pieces import pack_words

log = logging.getLogger("trainer")

_BATCH = 256


def tokenize_split(
    split, preprocessor, seq_length: int, log_every_seconds: float = 30.0, pack=None
) -> tuple[TokenizedSplit, np.ndarray, np.ndarray]:
    """(the split's tokens with token-aligned tag ids, how many words each sentence lost past
    seq_length, how many of its words have no piece). `pack`: packer(), shared by the splits."""
    pack = pack or packer(preprocessor, seq_length)
    word_ids, type_ids, lengths, labels, cut, pieceless, full = [], [], [], [], [], [], []
    specials = int(special_count(preprocessor, 1))
    meter = progress.Progress("tokenized", log_every_seconds, total=len(split))
    for start in range(0, len(split), _BATCH):
        sentences = split.sentences[start : start + _BATCH]
        counts = [len(s.words) for s in sentences]
        flat = [s.text[a:b] for s in sentences for a, b in s.words]
        inputs = pack(tf.RaggedTensor.from_row_lengths(tf.constant(flat, tf.string), counts))
        mask = inputs["input_mask"].numpy().astype(bool)
        word_ids.append(inputs["input_word_ids"].numpy()[mask])
        type_ids.append(inputs["input_type_ids"].numpy()[mask])
        lengths.append(mask.sum(axis=1))
        full.append(inputs["pieces"].numpy() + specials)
        positions = inputs["word_positions"].to_tensor(default_value=UNTAGGED).numpy()
        labels.append(aligned_labels(positions, split.labels[start : start + _BATCH], seq_length))
        words = tag_ids(split.labels[start : start + _BATCH])[:, : positions.shape[1]] != UNTAGGED
        past = _past_the_cut(positions, full[-1] > seq_length)
        cut.append(((positions == UNTAGGED) & words & past).sum(axis=1))
        pieceless.append(((positions == UNTAGGED) & words & ~past).sum(axis=1))
        meter.update(start + len(sentences))
    cat = lambda parts: np.concatenate(parts).astype(np.int32)  # noqa: E731
    return (
        TokenizedSplit(
            cat(word_ids),
            cat(type_ids),
            cat(lengths),
            np.concatenate(labels),
            np.ones(len(split), np.float32),
            cat(full),
        ),
        cat(cut),
        cat(pieceless),
    )


def _past_the_cut(positions: np.ndarray, too_long: np.ndarray) -> np.ndarray:
    """[B, W] bool: the words after a too long sentence's last word that has a position."""
    fitting = positions >= 0
    last = np.where(fitting.any(axis=1), positions.shape[1] - 1 - np.argmax(fitting[:, ::-1], axis=1), -1)
    return (np.arange(positions.shape[1])[None, :] > last[:, None]) & too_long[:, None]


def packer(preprocessor, seq_length: int):
    """word_pieces.pack_words as one traced function, whatever a batch's number of sentences
    (its ragged ops take seconds to trace: a split's last, shorter batch traced it again)."""
    words = tf.RaggedTensorSpec([None, None], tf.string, ragged_rank=1, row_splits_dtype=tf.int64)
    return tf.function(
        lambda words: pack_words(preprocessor, words, seq_length), input_signature=[words], autograph=False
    )


def aligned_labels(positions: np.ndarray, values: np.ndarray, seq_length: int) -> np.ndarray:
    """[B, seq_length]: each word's tag id (`values` [B, W]) at its first piece (`positions`
    [B, W], -1 for a word cut or padding), -1 elsewhere; or [B, seq_length, 1 + C] of a
    distilled run's packed targets [B, W, 1 + C] (tasks/tagging/distill.py), the teacher's
    columns 0 off the first pieces."""
    values = np.asarray(values)
    out = np.full([len(positions), seq_length, *values.shape[2:]], UNTAGGED, values.dtype)
    if values.ndim == 3:
        out[..., 1:] = 0
    rows, words = np.nonzero(positions >= 0)
    out[rows, positions[rows, words]] = values[rows, words]
    return out


def aligned_teacher(
    split, teacher: np.ndarray, preprocessor, seq_length: int, log_every_seconds: float = 30.0, pack=None
) -> np.ndarray:
    """float32 [N, seq_length, C]: a teacher's values of a split's words ([N, W, C], NaN past
    its words) on their first pieces, 0 elsewhere, as the split's tag ids are aligned (the
    validation split's, which distillation's metrics score the teacher on, as the student)."""
    packed = distill.pack(split.labels, teacher)
    tokens, _, _ = tokenize_split(
        dataclasses.replace(split, labels=packed), preprocessor, seq_length, log_every_seconds, pack
    )
    return tokens.labels[..., 1:]


def tokenize_splits(
    datasets, preprocessor, seq_length: int, log_every_seconds: float = 30.0
) -> tuple[dict[str, TokenizedSplit], dict[str, tuple]]:
    """({split: tokens}, {split: (words each sentence lost past seq_length, its words without a
    piece)}) of every labelled split."""
    out, lost, pack = {}, {}, packer(preprocessor, seq_length)
    for name, split in datasets.labelled().items():
        out[name], *lost[name] = tokenize_split(split, preprocessor, seq_length, log_every_seconds, pack)
    return out, lost


def log_lost(lost: dict[str, tuple], datasets, seq_length: int) -> None:
    """A warning naming each split's sentences cut at --max-seq-length and their words past
    it, and one for words without a piece, when there are any."""
    splits = datasets.labelled()
    words = {name: int((tag_ids(split.labels) != UNTAGGED).sum()) for name, split in splits.items()}
    shares = lambda which: ", ".join(  # noqa: E731
        f"{name} {int(counts[which].sum()):,} of {words[name]:,} words" for name, counts in lost.items()
    )
    if any(counts[0].any() for counts in lost.values()):
        cut = ", ".join(
            f"{name} {int((counts[0] > 0).sum()):,} of {len(splits[name]):,} sentences "
            f"({int(counts[0].sum()):,} of {words[name]:,} words)"
            for name, counts in lost.items()
        )
        log.warning(
            "sentences longer than --max-seq-length %d tokens are cut in training: their "
            "words past it are neither learned nor scored: %s (the exported model reads "
            "every word, in overlapping windows; a larger --max-seq-length, up to 512, "
            "trains on them)",
            seq_length,
            cut,
        )
    if any(counts[1].any() for counts in lost.values()):
        log.warning(
            "words the tokenizer gives no piece (control characters, zero-width spaces) "
            "are neither learned nor tagged: %s",
            shares(1),
        )
