"""A tagger's ONNX copy without TensorFlow (issue #66): raw strings -> the windows its network
reads, and the network's logits -> the SavedModel's answers (trainer/tasks/tagging/export.py's
`tokenize` and `outputs`, their names, values, dtypes and padding), in Python and numpy.

The tagger's SavedModel splits words with TF-Text's RE2 regex split and reads entities with TF
string ops, which ONNX has no operators for; only the network (token features in, per-token
logits out) is the copy's graph. Everything around it is here, each rule beside a comment
naming the TensorFlow function it mirrors:

- words and their code-point offsets (word_spans.split_words), by Unicode category
  from the standard library's `unicodedata`, as RE2's \\p{Z}, \\p{Cc} and \\p{P} classes read;
- each word's pieces (word_pieces.pack_word_windows, the preprocessor's `tokenize_words`): the
  word alone after the family's word prefix, by the copy's tokenizer.json (packing.py);
- the windows of --max-seq-length and the window each word is read in (word_windows);
- each word's tag at its first piece, its tag probabilities, and the entities of the tags over
  the whole text (tasks/tagging/spans.entity_runs, entity_outputs).

tagging.json (beside packing.json) holds what the tagger adds to the tokenizer: its tag names,
the windows' overlap and the word prefix (`tagging_json` makes it of the run's preprocessor).

`OnnxTagger` is the copy loaded (trainer.serving.variants.load picks it where tagging.json is):
it answers through a serving signature, as the tagger's SavedModel and its LiteRT int8 copy do
(int8.Int8TaggingModule), its network run by ONNX Runtime. `texts_differing` and
`largest_difference` are the export's check of the copy against its SavedModel, text by text.
"""

import functools
import json
import re
import sys
import unicodedata
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from trainer import storage
from trainer.errors import UserError
from trainer.serving.onnx import packing, runtime

TAGGING = "tagging.json"
FORMAT = 1
# The graph's one output (convert.TAGGER_OUTPUT; that module imports TensorFlow).
LOGITS = "logits"
# export.WORD_FEATURES (that module imports TensorFlow): `tokenize`'s per-word
# features, which `outputs` takes after the logits.
WORD_FEATURES = ("word_window", "word_positions", "word_start", "word_end")
# No cap on a text's windows: every word is read (word_windows.UNCAPPED).
UNCAPPED = np.iinfo(np.int64).max
# export._PADDING: what a padded entry of each kind of output holds.
_PADDING = {"O": b"", "i": -1, "f": 0.0}
# The ASCII symbols BERT's _is_punctuation counts (words._PUNCTUATION's !-/ :-@ [-` {-~).
_ASCII_SYMBOLS = ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E))
# Punctuation RE2's tables in TF-Text 2.21 (Unicode 15) hold and Python 3.11's (Unicode 14) do
# not: Devanagari Extended-A's and Kawi's, unassigned (Cn) there. Python 3.12 and 3.13 (Unicode
# 15 and 15.1) have them as P*, the same; read every code point both ways:
# tests/serving/onnx/test_onnx_tagging.py.
_UNICODE_15_PUNCTUATION = ((0x11B00, 0x11B09), (0x11F43, 0x11F4F))


def tagging_json(preprocessor, tag_names: Sequence[str], window_overlap: int) -> bytes:
    """tagging.json of a tagger's export (export.TaggingModule): its tag names, its
    windows' overlap, and the prefix its `preprocessor` (the run's, as built: a loaded
    SavedModel's keeps no Python attribute) reads each word after: byte-level BPE's space
    (preprocessing.SubwordPreprocessor.tokenize_words), none for WordPiece and SentencePiece."""
    return json.dumps(
        {
            "format": FORMAT,
            "tag_names": list(tag_names),
            "window_overlap": int(window_overlap),
            "word_prefix": getattr(getattr(preprocessor, "tokenizer", None), "word_prefix", ""),
        },
        indent=1,
        ensure_ascii=False,
    ).encode("utf-8")


@functools.cache
def _separators() -> "re.Pattern":
    """words._SPACES | words._PUNCTUATION as one pattern of the standard library's `re`: a run
    of separators (Unicode Z*, Cc, and ASCII whitespace, which is all Cc or Zs) or one
    punctuation character (Unicode P* and the ASCII symbols). Built once, from every code
    point's category (about 0.1 s)."""
    spaces, punctuation = [], []
    symbols = {code for low, high in _ASCII_SYMBOLS + _UNICODE_15_PUNCTUATION for code in range(low, high + 1)}
    for code in range(sys.maxunicode + 1):
        category = unicodedata.category(chr(code))
        if category[0] == "Z" or category == "Cc":
            spaces.append(code)
        elif category[0] == "P" or code in symbols:
            punctuation.append(code)
    return re.compile(f"({_character_class(spaces)}+)|{_character_class(punctuation)}")


def _character_class(codes: list[int]) -> str:
    """A `re` character class of sorted code points, as ranges."""
    ranges, start = [], codes[0]
    for previous, code in zip(codes, codes[1:] + [None]):
        if code != previous + 1:
            ranges.append(f"\\U{start:08x}" if start == previous else f"\\U{start:08x}-\\U{previous:08x}")
            start = code
    return f"[{''.join(ranges)}]"


def split_words(text: str) -> list[tuple[int, int]]:
    """(start, end) code-point offsets of `text`'s words, `end` exclusive: words.split_words.

    TF-Text's regex_split_with_offsets: the text between separators is a word, and a separator
    that is a punctuation character is a word too. A NUL is a control character here as
    U+0001 is there (split_words puts U+0001 in its place: RE2 reads a C string), so it
    separates words alike; a Python `str` indexes code points, as its offsets count."""
    words, position = [], 0
    for match in _separators().finditer(text):
        if match.start() > position:
            words.append((position, match.start()))
        if match.group(1) is None:  # punctuation: a word of its own
            words.append(match.span())
        position = match.end()
    if position < len(text):
        words.append((position, len(text)))
    return words


def reading_windows(first: np.ndarray, last: np.ndarray, budget: int, overlap: int):
    """word_windows.reading_windows: (window, offset) int64 of words whose first piece is at
    `first` among their text's pieces, their text's last window `last`: of the windows k from
    max(0, ceil((p - budget + 1) / stride)) to min(last, floor(p / stride)), the one where the
    fewer of the word's pieces before and after it in the window is largest (a side reaching
    the text's start, k = 0, or end, k = last, unlimited), the first on a tie."""
    stride = budget - overlap
    low = np.maximum((first - budget + stride) // stride, 0)
    high = np.maximum(np.minimum(first // stride, last), low)
    k = low[:, None] + np.arange(int((high - low).max(initial=0)) + 1)
    before = np.where(k > 0, first[:, None] - k * stride, UNCAPPED)
    after = np.where(k < last[:, None], k * stride + budget - 1 - first[:, None], UNCAPPED)
    context = np.where(k <= high[:, None], np.minimum(before, after), -1)
    chosen = k[np.arange(len(k)), np.argmax(context, axis=1)]  # argmax: the first largest
    return chosen, first - chosen * stride


def softmax(logits: np.ndarray) -> np.ndarray:
    """tf.nn.softmax over the last axis, in float32."""
    logits = logits.astype(np.float32)
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def entity_runs(tag_ids: np.ndarray, rows: np.ndarray):
    """spans.entity_runs of the words' tag ids [W] (0 is O, 2t + 1 B- and 2t + 2 I- of type t),
    the words of each text consecutive, `rows` [W] their texts: (type, first word, end word
    exclusive) int64 [E] of each entity, in word order. A run is a word and the I- of its type
    after it in its text; a run whose first tag is not O is an entity (one starting with an I-
    that continues nothing too)."""
    ids = np.asarray(tag_ids, np.int64)
    kind = (ids - 1) // 2
    text_start = np.concatenate([[True], rows[1:] != rows[:-1]])[: len(ids)]
    previous = np.where(text_start, -1, np.concatenate([[-1], kind])[:-1])  # the word before's type
    first = np.flatnonzero(~((ids > 0) & (ids % 2 == 0) & (kind == previous)))
    end = np.append(first[1:], len(ids))  # a text's first word starts a run: none crosses texts
    begins = ids[first] > 0
    return kind[first][begins], first[begins], end[begins]


class Tagger:
    """A tagger's ONNX copy's words and answers: `tokenize(texts)` and `outputs(texts, logits,
    *word features)` as export.TaggingModule's, `serve(texts, network)` between them.
    Texts are `str`."""

    def __init__(
        self, tokenizer: packing.Tokenizer, tag_names: Sequence[str], window_overlap: int, word_prefix: str = ""
    ):
        self.tokenizer = tokenizer
        self.tag_names = list(tag_names)
        self.type_names = [name[2:] for name in self.tag_names[1::2]]
        self.max_seq_length = tokenizer.max_seq_length
        self.window_overlap = window_overlap
        self.word_prefix = word_prefix

    @classmethod
    def from_dir(cls, path: str) -> "Tagger":
        """The tagger of a copy's folder (tokenizer.json, packing.json, tagging.json); one
        UserError naming the file when one is missing or not what the export writes."""
        tokenizer = packing.Tokenizer.from_dir(path)
        return cls(tokenizer, **_settings(storage.join(path, TAGGING), tokenizer.max_seq_length))

    def serve(self, texts: Sequence[str], network: Callable[[dict], np.ndarray]) -> dict:
        """TaggingModule.serve: `network` gives the logits [N, width, tags] of the windows'
        features [N, width] (cut to their longest row, as TaggingModule._logits runs them)."""
        features = self.tokenize(texts)
        width = int(features["input_mask"].sum(axis=1).max(initial=0))
        logits = network({name: features[name][:, :width] for name in packing.FEATURES})
        return self.outputs(texts, logits, *(features[name] for name in WORD_FEATURES))

    def tokenize(self, texts: Sequence[str]) -> dict:
        """TaggingModule.tokenize: the windows' features int32 [N, max_seq_length], a text's
        windows consecutive rows (word_pieces.pack_word_windows), and per word int64 [B, max(
        max_seq_length, most words)], -1 after a text's last (WORD_FEATURES): the row it is
        read in and its first piece's position there (-1 for a word without a piece), and its
        code-point offsets."""
        spans = [split_words(text) for text in texts]
        text_pieces, counts, firsts = self._pieces(texts, spans)
        # The windows (word_windows.split, preprocessing.split_into_windows uncapped), each
        # packed alone as bert_pack_inputs packs one segment.
        budget = self.max_seq_length - 2  # the start and end tokens
        stride = budget - self.window_overlap
        windows = packing.window_counts(
            np.array([len(text) for text in text_pieces], np.int64), budget, self.window_overlap, UNCAPPED
        )
        features = self.tokenizer.pack(
            [
                [
                    text[k * stride : k * stride + budget]
                    for text, count in zip(text_pieces, windows)
                    for k in range(count)
                ]
            ]
        )
        rows = np.repeat(np.arange(len(texts)), [len(row) for row in spans])  # each word's text
        window, offset = reading_windows(firsts, windows[rows] - 1, budget, self.window_overlap)
        text_rows = (np.cumsum(windows) - windows)[rows]  # its text's first window's row
        placed = counts > 0
        per_word = {
            "word_window": np.where(placed, window + text_rows, -1),
            "word_positions": np.where(placed, 1 + offset, -1),
            "word_start": np.array([start for row in spans for start, _ in row], np.int64),
            "word_end": np.array([end for row in spans for _, end in row], np.int64),
        }
        return {**features, **{name: self._by_text(value, rows, len(texts))[0] for name, value in per_word.items()}}

    def _pieces(self, texts: Sequence[str], spans: list[list[tuple[int, int]]]):
        """word_pieces._pieces: (each text's pieces, each word's piece count int64 [words], each
        word's first piece's offset among its text's pieces int64 [words]); every word is
        tokenized alone after the word prefix (the preprocessor's tokenize_words)."""
        encoded = self.tokenizer.word_pieces(
            [[self.word_prefix + text[start:end] for start, end in row] for text, row in zip(texts, spans)]
        )
        words = np.array([len(row) for row in spans], np.int64)
        word_offsets = np.cumsum(words) - words  # each text's first word among all
        owners = np.fromiter((owner for _, row in encoded for owner in row), np.int64)
        owners += np.repeat(word_offsets, [len(ids) for ids, _ in encoded])
        counts = np.bincount(owners, minlength=int(words.sum())).astype(np.int64)
        before = np.concatenate([[0], np.cumsum(counts)])  # pieces before each word, in all texts
        return [ids for ids, _ in encoded], counts, before[:-1] - np.repeat(before[word_offsets], words)

    def outputs(
        self,
        texts: Sequence[str],
        logits: np.ndarray,
        word_window: np.ndarray,
        word_positions: np.ndarray,
        word_start: np.ndarray,
        word_end: np.ndarray,
    ) -> dict:
        """TaggingModule.outputs: the answers of the tagger's `logits` [N, T, tags] of the
        windows `tokenize` made, for the words it found: strings as bytes, integers int64,
        scores float32, per-text ones padded as TaggingModule._padded pads them."""
        rows, columns = np.nonzero(word_start >= 0)  # the words, text by text, in order
        window, position, starts, ends = (
            value[rows, columns] for value in (word_window, word_positions, word_start, word_end)
        )
        tagged = position >= 0
        probabilities = softmax(logits[window[tagged], position[tagged]]).reshape(-1, len(self.tag_names))
        tag_ids = np.argmax(probabilities, axis=-1)
        tagged_rows, tagged_starts, tagged_ends = rows[tagged], starts[tagged], ends[tagged]
        # spans.entity_outputs: an entity's offsets are its first word's start and last word's
        # end; its score the mean over its words of the probability of the tag each was given.
        kinds, first, end = entity_runs(tag_ids, tagged_rows)
        chosen = probabilities.max(axis=-1, initial=0.0)
        # Each entity's sum of `chosen` over [first, end): reduceat sums between consecutive
        # indices, so the even ones of first_0, end_0, first_1, end_1, ... (a 0 after the last
        # word, as an end may be there).
        sums = np.add.reduceat(np.append(chosen, np.float32(0)), np.ravel([first, end], "F"))[::2]
        entity_rows, entity_start, entity_end = tagged_rows[first], tagged_starts[first], tagged_ends[end - 1]
        untagged = ~tagged
        outputs = {}
        for count, of, values in (
            (
                "entity_count",
                entity_rows,
                {
                    "entity_label": _strings(self.type_names[kind] for kind in kinds),
                    "entity_text": _substrings(texts, entity_rows, entity_start, entity_end),
                    "entity_start": entity_start,
                    "entity_end": entity_end,
                    "entity_score": sums[: len(first)] / (end - first).astype(np.float32),
                },
            ),
            (
                "word_count",
                tagged_rows,
                {
                    "word_tags": _strings(self.tag_names[tag] for tag in tag_ids),
                    "word_text": _substrings(texts, tagged_rows, tagged_starts, tagged_ends),
                    "word_start": tagged_starts,
                    "word_end": tagged_ends,
                    "word_probabilities": probabilities,
                },
            ),
            (
                "untagged_count",
                rows[untagged],
                {
                    "untagged_text": _substrings(texts, rows[untagged], starts[untagged], ends[untagged]),
                    "untagged_start": starts[untagged],
                    "untagged_end": ends[untagged],
                },
            ),
        ):
            for name, value in values.items():
                outputs[name], outputs[count] = self._by_text(value, of, len(texts))
        names = np.array([[name.encode("utf-8") for name in self.tag_names]] * len(texts), object)
        return {**outputs, "tag_names": names.reshape(len(texts), len(self.tag_names))}

    def _by_text(self, values: np.ndarray, rows: np.ndarray, texts: int) -> tuple:
        """TaggingModule._padded: (values [n, ...] of texts `rows` [n] (ascending) as one array
        [texts, max(max_seq_length, most of one text), ...] padded with _PADDING of their
        kind, how many each text has int64 [texts])."""
        counts = np.bincount(rows, minlength=texts).astype(np.int64)
        width = max(self.max_seq_length, int(counts.max(initial=0)))
        padded = np.full([texts, width, *values.shape[1:]], _PADDING[values.dtype.kind], values.dtype)
        padded[rows, np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)] = values
        return padded, counts


def _strings(values) -> np.ndarray:
    """Strings as a loaded SavedModel returns them: bytes, in an object array."""
    return np.array([value.encode("utf-8") for value in values], object)


def _substrings(texts: Sequence[str], rows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """spans.substrings: the parts of texts `rows` between code-point offsets, as Python slices
    a `str`."""
    return _strings(texts[row][start:end] for row, start, end in zip(rows, starts, ends))


def _settings(path: str, max_seq_length: int) -> dict:
    """tagging.json as Tagger's keyword arguments; one UserError naming the file and the field
    when it is not what tagging_json writes."""
    if not storage.exists(path):
        raise UserError(
            f"{path}: missing (a tagger's ONNX copy holds {TAGGING} beside {packing.PACKING}); export the copy again"
        )
    try:
        raw = json.loads(storage.read_text(path))
        if raw.get("format") != FORMAT:
            raise UserError(
                f"{path}: format {raw.get('format')!r}, not {FORMAT}: written by another "
                "version of the trainer; export the copy again with this one"
            )
        names, overlap, prefix = raw["tag_names"], raw["window_overlap"], raw["word_prefix"]
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None
    except (AttributeError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a {TAGGING} this trainer reads ({type(e).__name__}: {e})") from None
    if not (isinstance(names, list) and len(names) % 2 == 1 and all(isinstance(n, str) for n in names)):
        raise UserError(f"{path}: tag_names is not a list of O and a B- and I- tag per type")
    if not (isinstance(overlap, int) and 0 <= overlap < max_seq_length - 2):
        raise UserError(
            f"{path}: window_overlap {overlap!r} is not a count of pieces below "
            f"--max-seq-length {max_seq_length} less the start and end tokens"
        )
    if not isinstance(prefix, str):
        raise UserError(f"{path}: word_prefix {prefix!r} is not a string")
    return {"tag_names": names, "window_overlap": overlap, "word_prefix": prefix}


class ServingFunction(NamedTuple):
    """A serving function in place of a loaded signature: called with `text=`, with the input
    and output structures trainer.inference.loaded_model reads of a signature."""

    function: Callable
    structured_input_signature: tuple  # ((), {"text": None})
    structured_outputs: tuple  # the output names, which tell the task (task_registry.of_export)

    def __call__(self, **inputs) -> dict:
        return self.function(**inputs)


class OnnxTagger:
    """A tagger's ONNX copy, loaded to read like its loaded SavedModel to trainer.inference.loaded_model:
    it answers through `serving_signature` (a tagger's export has no `predict_tokens`: its words
    and entities are read around the network), Tagger's words and answers around ONNX Runtime.
    Called from one thread at a time (trainer.predict's loop, the server's inference thread)."""

    def __init__(self, copy_dir: str):
        found = runtime.signature_of(runtime.read_facts(copy_dir))
        self.serving_signature = ServingFunction(self.serve, ((), {name: None for name in found.inputs}), found.outputs)
        self.tagger = Tagger.from_dir(copy_dir)
        self._runs = runtime.Runs(storage.join(copy_dir, runtime.MODEL))

    def tokenize(self, texts) -> dict:
        """The windows' and words' features of `texts`, as the SavedModel's `tokenize` returns
        them (Tagger.tokenize); the export's check compares both."""
        return self.tagger.tokenize(_texts(texts))

    def serve(self, text) -> dict:
        """The SavedModel's answers of the texts `text` (str or bytes)."""
        return self.tagger.serve(_texts(text), self.logits)

    def logits(self, features: dict) -> np.ndarray:
        """The network's logits [N, max_seq_length, tags] of the windows' `features`, sorted by
        length and run as the sentence copies' rows are (runtime.cut_runs: runs of like lengths,
        side by side; the SavedModel runs at most 128 windows per call, all cut to their
        longest)."""
        lengths = np.asarray(features["input_mask"]).sum(axis=1)
        order = np.argsort(lengths, kind="stable")
        logits = np.zeros([len(order), self.tagger.max_seq_length, len(self.tagger.tag_names)], np.float32)
        slices, feeds = runtime.run_feeds(features, packing.FEATURES, order)
        for rows, (run,) in zip(slices, self._runs.run([LOGITS], feeds)):
            logits[rows, : run.shape[1]] = run  # the graph pads to max_seq_length (heads.TokenPadding)
        return logits


def _texts(texts) -> list[str]:
    """Texts as `str`, from a batch of str or bytes (trainer.inference.loaded_model's object arrays)."""
    return [
        text.decode("utf-8") if isinstance(text, bytes) else str(text) for text in np.asarray(texts, object).reshape(-1)
    ]


def texts_differing(theirs: dict, ours: dict) -> np.ndarray:
    """The texts (indices) whose tokens differ between two `tokenize` outputs of the same texts
    (the SavedModel's and a copy's). A row there is a window, not a text, and it moves with
    every window before it: each text is compared by what its answers read, its words' features
    (their windows counted from its first) and the windows its words are read in."""
    return np.flatnonzero([a != b for a, b in zip(_read_tokens(theirs), _read_tokens(ours))])


def _read_tokens(features: dict) -> list:
    """Per text, the bytes of its words' features and of the windows they are read in."""
    features = {name: np.asarray(value) for name, value in features.items()}
    read = []
    for row, words in enumerate(features["word_start"] >= 0):
        window = features["word_window"][row][words]
        windows = np.unique(window[window >= 0])
        first = windows[0] if len(windows) else 0
        parts = [
            np.where(window >= 0, window - first, -1),
            *(features[name][row][words] for name in WORD_FEATURES[1:]),
            *(features[name][windows] for name in packing.FEATURES),
        ]
        read.append(b"|".join(part.astype(np.int64).tobytes() for part in parts))
    return read


def largest_difference(theirs: dict, ours: dict, texts: np.ndarray) -> float:
    """The largest difference between two answers of the same texts (the SavedModel's and a
    copy's) in the probability of any tag of any word (word_probabilities), over `texts`
    (indices: those whose tokens agree). Entities are compared by the check's agreement: one
    that differs has no counterpart to subtract."""
    largest = 0.0
    for row in texts:
        count = int(theirs["word_count"][row])
        difference = ours["word_probabilities"][row][:count] - theirs["word_probabilities"][row][:count]
        largest = max(largest, float(np.abs(difference).max(initial=0.0)))
    return largest


def parity(reference, loaded, float32: dict, candidate: dict, texts, max_difference: float | None = None) -> dict:
    """serving.quantize.parity of a copy that answers through its signature, as a tagger's do,
    whose `tokenize` rows are windows, not texts: `token_rows_differing` counts the texts whose
    words or the windows they are read in differ, `max_difference` is of the words' tag
    probabilities, over the other texts (its entities are matched by the check's agreement)."""
    from trainer.serving import quantize

    theirs = {name: np.asarray(value) for name, value in reference.tokenize(np.asarray(texts, object)).items()}
    differing = texts_differing(theirs, loaded.tokenize(texts))
    largest = largest_difference(float32, candidate, np.setdiff1d(np.arange(len(texts)), differing))
    return quantize.parity_figures(differing, largest, texts, max_difference)


def window_overlap(reference) -> int:
    """The windows' overlap a tagger's export saved; one line for an export from before
    windows (it cut each text at --max-seq-length), which this copy does not mirror."""
    saved = getattr(reference, "window_overlap", None)
    if saved is None:
        raise UserError(
            "this tagger's export predates windows (it cuts each text at "
            "--max-seq-length), which its ONNX copy would not; export the run again"
        )
    return int(saved.numpy())
