"""An ONNX copy's `tokenize` without TensorFlow (issue #66): texts -> the model's int32 features,
equal to the SavedModel's `tokenize` (trainer.data.input_pipeline.encode), from the copy's
tokenizer.json (the `tokenizers` library: the pieces, without special tokens) and packing.json
(tokenizer_files.py: the family's special tokens, --max-seq-length, --long-texts).

The packing mirrors trainer/modeling/encoders/preprocessing.py in numpy, rule for rule; each
function names the one whose rule it applies, where the rule and its reasons are written out:

- truncate: `[start] a [end]`, or `[start] a [end] (separator) b [end]` with b's tokens typed 1
  (pack_segments), a pair cut longest first (trim_longest_first, longest_first_shares);
- head-tail: each text's share of the budget (a pair's by longest_first_shares) kept as its
  first quarter and last three quarters (input_pipeline.cut, keep_head_and_tail);
- windows (single texts): each text's pieces in windows of the budget sharing window_overlap
  pieces, at most max_windows (window_counts, split_into_windows), each packed alone, side by
  side in a row of max_windows * max_seq_length; the windows after a text's last are all 0
  (input_pipeline.encode).

Nothing here imports TensorFlow: this runs where only numpy, onnxruntime and tokenizers are.
"""

import dataclasses
import json
import os
from collections.abc import Sequence

import numpy as np

from trainer import storage
from trainer.errors import UserError

TOKENIZER, PACKING = "tokenizer.json", "packing.json"
FORMAT = 1  # packing.json's layout (tokenizer_files.packing_settings writes it)
# trainer.modeling.encoders.layers.INPUT_KEYS (that module imports TensorFlow).
FEATURES = ("input_word_ids", "input_mask", "input_type_ids")
MODES = ("truncate", "head-tail", "windows")

# One thread for `tokenizers`' batches: on 2 shared cores the design study (issue #66) found it
# faster than the rayon pool, and 4,000 SST-2 texts took 0.17 s either way at load 6 (0.35 s
# for 4,000 tweets), a few percent of a prediction's time, leaving the other core to ONNX
# Runtime. It also spares a forked server process tokenizers' fork warning. An environment
# that sets the variable keeps its own choice.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclasses.dataclass(frozen=True)
class LongTexts:
    """--long-texts and its window flags, as packing.json holds them (input_pipeline.LongTexts)."""

    mode: str = "truncate"
    window_overlap: int = 0
    max_windows: int = 1


@dataclasses.dataclass(frozen=True)
class Layout:
    """A family's special token ids and how it packs one or two texts (preprocessing.SpecialTokens)."""

    start: int
    end: int
    pad: int
    pair_separator: tuple = ()
    typed_pairs: bool = True

    def special_count(self, segments: int) -> int:
        """Special tokens in a row of one or two texts (input_pipeline.special_count)."""
        return 2 if segments == 1 else 3 + len(self.pair_separator)


class Tokenizer:
    """Texts (and pairs) -> {name: int32 [N, width]} as the SavedModel's `tokenize` returns them."""

    def __init__(self, tokenizer, layout: Layout, max_seq_length: int, long_texts: LongTexts, pair: bool):
        self._tokenizer = tokenizer  # a tokenizers.Tokenizer
        self.layout = layout
        self.max_seq_length = max_seq_length
        self.long_texts = long_texts
        self.pair = pair

    @classmethod
    def from_dir(cls, path: str) -> "Tokenizer":
        """The tokenizer of a copy's folder (tokenizer.json and packing.json); one UserError
        naming the file when either is missing or unreadable."""
        import tokenizers

        settings = _settings(storage.join(path, PACKING))
        tokenizer_file = storage.join(path, TOKENIZER)
        try:
            tokenizer = tokenizers.Tokenizer.from_str(_read(tokenizer_file))
        except Exception as e:  # tokenizers raises a bare Exception for a file it cannot parse
            raise UserError(
                f"{tokenizer_file}: not a tokenizer.json the tokenizers library reads "
                f"({str(e).splitlines()[0] if str(e) else type(e).__name__})"
            ) from None
        return cls(tokenizer, **settings)

    @property
    def width(self) -> int:
        """Features per row: max_seq_length, or max_windows of them side by side (windows)."""
        windows = self.long_texts.max_windows if self.long_texts.mode == "windows" else 1
        return windows * self.max_seq_length

    def features(self, texts: Sequence[str], pairs: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """int32 [N, width] features of N texts (and N second texts, for a pair model)."""
        if (pairs is not None) != self.pair:
            raise ValueError(
                "a pair model reads texts and pairs" if self.pair else "this model reads single texts, not pairs"
            )
        segments = [self.pieces(texts)] + ([] if pairs is None else [self.pieces(pairs)])
        if self.long_texts.mode == "windows":
            return self._windows(segments[0])
        if self.long_texts.mode == "head-tail":
            budget = self.max_seq_length - self.layout.special_count(len(segments))
            shares = longest_first_shares([_lengths(s) for s in segments], budget)
            segments = [
                [keep_head_and_tail(row, int(keep)) for row, keep in zip(segment, share)]
                for segment, share in zip(segments, shares)
            ]
        return self.pack(segments)

    def pieces(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, without special tokens."""
        encodings = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    def word_pieces(self, texts: Sequence[Sequence[str]]) -> list[tuple]:
        """(token ids, the word each came from) of each text given as its words, each word
        tokenized alone (a tagger's: tasks/tagging/onnx_copy.py), without special tokens. (encode_batch:
        encode_batch_fast tracks no words.)"""
        encodings = self._tokenizer.encode_batch(
            [list(words) for words in texts], is_pretokenized=True, add_special_tokens=False
        )
        return [(encoding.ids, encoding.word_ids) for encoding in encodings]

    def pack(self, segments: list[list[list[int]]]) -> dict[str, np.ndarray]:
        """pack_segments: rows of one or two segments, cut longest first to fit max_seq_length."""
        layout, length = self.layout, self.max_seq_length
        shares = longest_first_shares([_lengths(s) for s in segments], length - layout.special_count(len(segments)))
        features = _empty(len(segments[0]), length, layout.pad)
        for i, first in enumerate(segments[0]):
            row = [layout.start, *first[: shares[0][i]], layout.end]
            types = [0] * len(row)
            if len(segments) > 1:
                second = [*layout.pair_separator, *segments[1][i][: shares[1][i]], layout.end]
                row += second
                types += [int(layout.typed_pairs)] * len(second)
            _put(features, i, row, types)
        return features

    def _windows(self, texts: list[list[int]]) -> dict[str, np.ndarray]:
        """input_pipeline.encode's windows: every window of every text packed alone (a text's
        windows split_into_windows'), then a text's side by side, 0 after its last."""
        long_texts, length = self.long_texts, self.max_seq_length
        budget = length - self.layout.special_count(1)
        stride = budget - long_texts.window_overlap
        counts = window_counts(_lengths(texts), budget, long_texts.window_overlap, long_texts.max_windows)
        windows = [
            pieces[k * stride : k * stride + budget] for pieces, count in zip(texts, counts) for k in range(count)
        ]
        packed = self.pack([windows])
        text = np.repeat(np.arange(len(texts)), counts)
        window = np.concatenate([np.arange(count) for count in counts]) if len(texts) else text
        features = {}
        for name in FEATURES:
            side_by_side = np.zeros([len(texts), long_texts.max_windows, length], np.int32)
            side_by_side[text, window] = packed[name]
            features[name] = side_by_side.reshape([len(texts), self.width])
        return features


def longest_first_shares(lengths: list[np.ndarray], budget: int) -> list[np.ndarray]:
    """preprocessing.longest_first_shares: how many tokens each of one or two segments keeps
    within `budget` per row, as Hugging Face's "longest_first" truncation decides."""
    if len(lengths) == 1:
        return [np.minimum(lengths[0], budget)]
    first, second = lengths
    short, long = np.minimum(first, second), np.maximum(first, second)
    fits, halves = first + second <= budget, 2 * short > budget
    keep_short = np.where(fits | ~halves, short, budget // 2)
    keep_long = np.where(fits, long, np.where(halves, budget - budget // 2, budget - short))
    first_longer = first > second
    return [np.where(first_longer, keep_long, keep_short), np.where(first_longer, keep_short, keep_long)]


def keep_head_and_tail(pieces: list[int], budget: int) -> list[int]:
    """preprocessing.keep_head_and_tail: a row longer than `budget` cut to its first quarter and
    last three quarters of the budget; a shorter row whole."""
    if len(pieces) <= budget:
        return pieces
    head = budget // 4
    return pieces[:head] + pieces[len(pieces) - (budget - head) :]


def window_counts(lengths: np.ndarray, budget: int, overlap: int, max_windows: int) -> np.ndarray:
    """preprocessing.window_counts: windows of `budget` pieces, each sharing `overlap` with the
    one before, covering texts of `lengths` pieces; at least one, at most `max_windows`."""
    stride = budget - overlap
    needed = 1 + (np.maximum(lengths - budget, 0) + stride - 1) // stride
    return np.minimum(needed, max_windows)


def _lengths(segment: list[list[int]]) -> np.ndarray:
    return np.array([len(pieces) for pieces in segment], np.int64)


def _empty(rows: int, width: int, pad: int) -> dict[str, np.ndarray]:
    features = {name: np.zeros([rows, width], np.int32) for name in FEATURES}
    features["input_word_ids"][:] = pad
    return features


def _put(features: dict[str, np.ndarray], row: int, ids: list, types: list) -> None:
    """One packed row's ids, mask and types; the padding after them stays."""
    features["input_word_ids"][row, : len(ids)] = ids
    features["input_mask"][row, : len(ids)] = 1
    features["input_type_ids"][row, : len(ids)] = types


def _read(path: str) -> str:
    if not storage.exists(path):
        raise UserError(
            f"{path}: missing (an ONNX copy's folder holds {TOKENIZER} and {PACKING}); export the copy again"
        )
    return storage.read_text(path)


def _settings(path: str) -> dict:
    """packing.json as Tokenizer's keyword arguments; one UserError naming the file and the
    field when it is not what tokenizer_files.py writes."""
    try:
        raw = json.loads(_read(path))
        if raw.get("format") != FORMAT:
            raise UserError(
                f"{path}: format {raw.get('format')!r}, not {FORMAT}: written by another "
                "version of the trainer; export the copy again with this one"
            )
        long_texts = LongTexts(**raw["long_texts"])
        ids = raw["special_ids"]
        layout = Layout(
            int(ids["start"]),
            int(ids["end"]),
            int(ids["pad"]),
            tuple(int(i) for i in ids["pair_separator"]),
            bool(raw["typed_pairs"]),
        )
        settings = {
            "layout": layout,
            "max_seq_length": int(raw["max_seq_length"]),
            "long_texts": long_texts,
            "pair": bool(raw["pair"]),
        }
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise UserError(f"{path}: not a packing.json this trainer reads ({type(e).__name__}: {e})") from None
    if long_texts.mode not in MODES:
        raise UserError(f"{path}: long_texts mode {long_texts.mode!r}, not one of {', '.join(MODES)}")
    if long_texts.mode == "windows" and settings["pair"]:
        raise UserError(f"{path}: long_texts mode windows reads single texts, and pair is true")
    return settings
