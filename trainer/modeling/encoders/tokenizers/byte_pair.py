"""Byte-level BPE (RoBERTa, ModernBERT) as TensorFlow ops, giving Hugging Face's ids exactly.

Why our own, not KerasHub's `keras_hub.tokenizers.BytePairTokenizer` (keras-hub 0.32.0, measured
from tf_keras code with TF_USE_LEGACY_KERAS=1): it does run inside a tf.function and a tf_keras
layer, and a SavedModel holding it reloads with only tensorflow and tensorflow_text. But its ids
differ from Hugging Face's on 3 of 16 tricky strings of a tiny RoBERTa vocabulary: a trailing
run of spaces ("trail  "), any text with U+096C "६" (its split marker: the character is silently
dropped) and added tokens such as "<mask>"; it has no normalizers (ModernBERT's NFC) and does
not read tokenizer.json. It would add keras-hub (18 MB), kagglehub and kagglesdk (pinned to
0.1.28) to the install, Keras 3 to every process that builds a model (about 7 s more to import
here), and tokenizers and sentencepiece as runtime dependencies.

The algorithm is KerasHub's (keras_hub/src/tokenizers/byte_pair_tokenizer.py, Apache 2.0): RE2
splitting that emulates the GPT-2 pattern's lookahead, the byte-to-unicode table, a merge loop
over ragged tensors with a rank lookup table. What differs, for exact parity and speed: the
lookahead `\\s+(?!\\S)` is emulated without a marker character (`_pre_tokenize`); whitespace
is the set Oniguruma's Unicode `\\s` matches, which Hugging Face's regex uses (RE2's `\\s` is
ASCII only); symbols are vocabulary ids and a merge is one int64 hash lookup, not string joins;
each batch merges its distinct words only, with no mutable cache to save or share between
tf.data threads; added tokens are split out first, as Hugging Face does.
"""

import dataclasses
import json
from collections.abc import Sequence

import tensorflow as tf
import tensorflow_text as text

from trainer.errors import UserError

# Oniguruma's Unicode \s (tokenizers' regex engine): \t-\r, NEL, Zs, Zl and Zp (ids checked
# against Hugging Face's for every BMP code point). Rust's char::is_whitespace, which strips
# added tokens' lstrip/rstrip, is the same set.
WHITESPACE = (
    r"\t\n\x{0b}\f\r \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}"
    r"\x{205f}\x{3000}"
)
# A run of whitespace with the non-space run after it, or whitespace at the end of the text.
_CHUNK = rf"[{WHITESPACE}]*[^{WHITESPACE}]+|[{WHITESPACE}]+"
# GPT-2's pattern without its whitespace alternatives, for a chunk's non-space part.
_WORD = rf"'s|'t|'re|'ve|'m|'ll|'d| ?\p{{L}}+| ?\p{{N}}+| ?[^{WHITESPACE}\p{{L}}\p{{N}}]+"
# A chunk's non-space part that _WORD would not split: no letter, digit and other mixed, and
# so no contraction either (they start with "'" and end with a letter).
_ONE_WORD = rf" ?(?:\p{{L}}+|\p{{N}}+|[^{WHITESPACE}\p{{L}}\p{{N}}]+)"
_NUL = "\uffff"  # see BytePairTokenizer.tokenize
_NORMALIZERS = ("NFC", "NFD", "NFKC", "NFKD")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table, which byte-level vocabularies are spelt in."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}


@dataclasses.dataclass(frozen=True)
class AddedToken:
    """A token matched in the text before pre-tokenization (tokenizer.json's added_tokens)."""

    content: str
    id: int
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False


@dataclasses.dataclass(frozen=True)
class BytePairSpec:
    """Everything the ids depend on, read from either checkpoint layout."""

    vocab: dict[str, int]
    merges: list[tuple[str, str]]
    added_tokens: list[AddedToken]
    normalizers: tuple[str, ...] = ()
    add_prefix_space: bool = False
    use_regex: bool = True
    unk_token: str | None = None
    files: tuple[str, ...] = ()


def _read(path: str) -> str:
    """A UTF-8 file through tf.io.gfile (gs:// too); a UserError naming it when unreadable."""
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read().decode("utf-8")
    except tf.errors.NotFoundError:
        raise UserError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not valid UTF-8 (offset {e.start})") from None


def read_json(path: str):
    """A tokenizer's JSON file (gs:// too); a UserError naming it when unreadable or invalid."""
    try:
        return json.loads(_read(path))
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None


def _vocab(value, path: str) -> dict[str, int]:
    if not (
        isinstance(value, dict)
        and value
        and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value.values())
    ):
        raise UserError(f"{path}: the vocabulary must map tokens to ids >= 0")
    return value


def _merge(entry, number: int, path: str) -> tuple[str, str]:
    """One merge, written "a b" (merges.txt, older tokenizer.json) or ["a", "b"]."""
    pair = entry.split(" ") if isinstance(entry, str) else entry
    if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
        raise UserError(f"{path}: merge {number} is {entry!r}, not two tokens")
    return pair[0], pair[1]


def spec_from_vocab_and_merges(vocab_file: str, merges_file: str, special_tokens: Sequence[str]) -> BytePairSpec:
    """RoBERTa's layout, read as RobertaTokenizerFast(vocab_file, merges_file) reads it: the
    family's `special_tokens` the vocabulary has are added tokens."""
    vocab = _vocab(read_json(vocab_file), vocab_file)
    lines = [line for line in _read(merges_file).split("\n") if line.strip() and not line.startswith("#version")]
    merges = [_merge(line.rstrip("\r"), n, merges_file) for n, line in enumerate(lines, 1)]
    added = [AddedToken(token, vocab[token]) for token in special_tokens if token in vocab]
    return BytePairSpec(vocab, merges, added, files=(vocab_file, merges_file))


def spec_from_tokenizer_json(path: str) -> BytePairSpec:
    """tokenizer.json's BPE model, normalizer, pre-tokenizer and added tokens; a UserError for
    any setting this tokenizer does not implement, rather than ids that silently differ."""
    config = read_json(path)
    model = config.get("model") if isinstance(config, dict) else None
    if not isinstance(model, dict):
        raise UserError(f'{path}: not a tokenizer.json (no "model" object)')
    unsupported = [
        f"model.{key}={model.get(key)!r}"
        for key, ok in (
            ("type", model.get("type") == "BPE"),
            ("dropout", not model.get("dropout")),
            ("continuing_subword_prefix", not model.get("continuing_subword_prefix")),
            ("end_of_word_suffix", not model.get("end_of_word_suffix")),
            ("byte_fallback", not model.get("byte_fallback")),
            ("fuse_unk", not model.get("fuse_unk")),
            ("ignore_merges", not model.get("ignore_merges")),
        )
        if not ok
    ]
    normalizers = _normalizers(config.get("normalizer"), unsupported)
    byte_level = _byte_level(config.get("pre_tokenizer"), unsupported)
    added = []
    for token in config.get("added_tokens") or []:
        added.append(_added_token(token, path))
        if token.get("single_word"):
            unsupported.append(f"added token {token.get('content')!r} with single_word=true")
    if unsupported:
        raise UserError(f"{path}: the byte-level BPE tokenizer does not implement {', '.join(unsupported)}")
    merges = [_merge(entry, n, path) for n, entry in enumerate(model.get("merges") or [], 1)]
    return BytePairSpec(
        _vocab(model.get("vocab"), path),
        merges,
        added,
        normalizers,
        bool(byte_level.get("add_prefix_space")),
        byte_level.get("use_regex", True),
        model.get("unk_token"),
        files=(path,),
    )


def _added_token(entry, path: str) -> AddedToken:
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("content"), str)
        and entry["content"]
        and isinstance(entry.get("id"), int)
        and entry["id"] >= 0
    ):
        raise UserError(f"{path}: added token {json.dumps(entry)} needs a content and an id >= 0")
    return AddedToken(
        entry["content"],
        entry["id"],
        bool(entry.get("lstrip")),
        bool(entry.get("rstrip")),
        bool(entry.get("normalized")),
    )


def _normalizers(normalizer, unsupported: list) -> tuple[str, ...]:
    """The Unicode normal forms applied in turn (tokenizer.json: null, one, or a Sequence)."""
    if not normalizer:
        return ()
    steps = normalizer.get("normalizers", []) if normalizer.get("type") == "Sequence" else [normalizer]
    forms = tuple(step.get("type") for step in steps)
    unsupported += [f"normalizer {form}" for form in forms if form not in _NORMALIZERS]
    return forms


def _byte_level(pre_tokenizer, unsupported: list) -> dict:
    """The ByteLevel pre-tokenizer's settings, alone or as a Sequence's only step."""
    steps = (
        [pre_tokenizer]
        if not pre_tokenizer or pre_tokenizer.get("type") != "Sequence"
        else pre_tokenizer.get("pretokenizers", [])
    )
    if len(steps) != 1 or not steps[0] or steps[0].get("type") != "ByteLevel":
        unsupported.append(f"pre_tokenizer {json.dumps(pre_tokenizer)} (only ByteLevel)")
        return {}
    return steps[0]


def _escape(token: str) -> str:
    """RE2-quoted token text; re.escape quotes non-ASCII letters RE2 would reject as escapes."""
    return "".join(c if c.isalnum() and c.isascii() else f"\\x{{{ord(c):x}}}" for c in token)


def _table(keys, values, key_dtype, default: int) -> tf.lookup.StaticHashTable:
    """A constant lookup table: part of the graph, so a SavedModel needs no file to rebuild it."""
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(keys, key_dtype), tf.constant(values, tf.int64)),
        default_value=default,
    )


class BytePairTokenizer(tf.Module):
    """tf.string [B] -> int32 RaggedTensor [B, (tokens)]: Hugging Face's fast tokenizer's ids
    for `tokenizer(text, add_special_tokens=False)["input_ids"]`, as graph ops.

    Build it with `from_vocab_and_merges` (RoBERTa) or `from_tokenizer_json` (ModernBERT); its
    tables are constants tracked as attributes, so a SavedModel that tracks this module reloads
    with only `import tensorflow, tensorflow_text`. `assets` holds the source files to ship.
    """

    # A word tokenized alone is read after a space, as in running text (token classification;
    # Hugging Face's add_prefix_space=True for words given with is_split_into_words=True).
    word_prefix = " "

    def __init__(self, spec: BytePairSpec, name: str | None = None):
        super().__init__(name=name)
        ids = {**spec.vocab, **{token.content: token.id for token in spec.added_tokens}}
        self.vocab_size = max(ids.values()) + 1
        self._ids = json.dumps(ids)  # a str: tf.Module would wrap and track a dict
        self._source = spec.files[0] if spec.files else "the tokenizer"
        self._normalizers = spec.normalizers
        self._add_prefix_space, self._use_regex = spec.add_prefix_space, spec.use_regex
        self._unknown_id = -1 if spec.unk_token is None else self.token_to_id(spec.unk_token)
        self.assets = [tf.saved_model.Asset(path) for path in spec.files]
        alphabet = bytes_to_unicode()
        self._byte_ids = _table(
            [bytes([b]) for b in range(256)], [spec.vocab.get(alphabet[b], -1) for b in range(256)], tf.string, -1
        )
        codes = self._merge_codes(spec)
        self._merges = _table(list(codes), list(codes.values()), tf.int64, -1)
        self._raw_added = self._added_pattern([t for t in spec.added_tokens if not t.normalized])
        self._normalized_added = self._added_pattern([t for t in spec.added_tokens if t.normalized])
        if spec.added_tokens:
            self._added_ids = _table(
                [t.content for t in spec.added_tokens], [t.id for t in spec.added_tokens], tf.string, -1
            )

    @classmethod
    def from_vocab_and_merges(cls, vocab_file: str, merges_file: str, special_tokens: Sequence[str], **kwargs):
        return cls(spec_from_vocab_and_merges(vocab_file, merges_file, special_tokens), **kwargs)

    @classmethod
    def from_tokenizer_json(cls, path: str, **kwargs):
        return cls(spec_from_tokenizer_json(path), **kwargs)

    def token_ids(self) -> dict[str, int]:
        """token -> id of the whole vocabulary (the report maps attributed ids back to pieces)."""
        return json.loads(self._ids)

    def token_to_id(self, token: str) -> int:
        """The id of `token` (a special token, at build time); a UserError when it is absent."""
        ids = self.token_ids()
        if token not in ids:
            raise UserError(f"{self._source}: the vocabulary has no token {token!r}")
        return ids[token]

    def _merge_codes(self, spec: BytePairSpec) -> dict[int, int]:
        """(left id, right id) packed in one int64 -> rank * vocab_size + merged id: the lowest
        code of a word is its lowest-rank merge. A repeated merge keeps its last rank, as in
        Hugging Face's BPE."""
        codes = {}
        for rank, (left, right) in enumerate(spec.merges):
            missing = [t for t in (left, right, left + right) if t not in spec.vocab]
            if missing:
                raise UserError(
                    f"{self._source}: merge {rank + 1} ({left} {right}) needs "
                    f"{missing[0]!r}, which is not in the vocabulary"
                )
            key = spec.vocab[left] * self.vocab_size + spec.vocab[right]
            codes[key] = rank * self.vocab_size + spec.vocab[left + right]
        return codes

    @staticmethod
    def _added_pattern(tokens: Sequence[AddedToken]) -> str | None:
        """An RE2 alternation of the tokens, longest first (Hugging Face matches the longest),
        with the whitespace that lstrip/rstrip tokens absorb."""
        alternatives = [
            (f"[{WHITESPACE}]*" if t.lstrip else "") + _escape(t.content) + (f"[{WHITESPACE}]*" if t.rstrip else "")
            for t in sorted(tokens, key=lambda t: -len(t.content))
        ]
        return "|".join(alternatives) or None

    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """[B] strings -> int32 [B, (tokens)], without special tokens."""
        # TF-Text's regex_split ends a text at its first NUL, dropping the rest (tensorflow/text
        # reads it as a C string); U+FFFF, a noncharacter Unicode keeps for internal use, is
        # in the same regex classes as NUL and stands in for it until the words are split (a
        # text with U+FFFF itself gets NUL's ids there).
        strings = tf.strings.regex_replace(tf.convert_to_tensor(strings, tf.string), "\x00", _NUL)
        pieces = tf.RaggedTensor.from_row_lengths(strings, tf.ones_like(strings, tf.int64))
        added = pieces.with_flat_values(tf.zeros_like(strings, tf.bool))
        if self._raw_added:
            pieces, added = _split_added(pieces, added, self._raw_added)
        values = pieces.flat_values
        for form in self._normalizers:
            values = tf.where(added.flat_values, values, text.normalize_utf8(values, form))
        pieces = pieces.with_flat_values(values)
        if self._normalized_added:
            pieces, added = _split_added(pieces, added, self._normalized_added)
        values, is_added = pieces.flat_values, added.flat_values
        words = self._pre_tokenize(tf.where(is_added, "", values))
        ids = words.with_flat_values(self._encode_words(words.flat_values)).merge_dims(1, 2)
        if self._raw_added or self._normalized_added:
            ids = tf.concat(
                [
                    tf.RaggedTensor.from_row_lengths(
                        self._added_id(tf.boolean_mask(values, is_added)), tf.cast(is_added, tf.int64)
                    ),
                    ids,
                ],
                axis=1,
            )
        return tf.cast(pieces.with_flat_values(ids).merge_dims(1, 2), tf.int32)

    def _added_id(self, pieces: tf.Tensor) -> tf.Tensor:
        """The ids of added-token pieces, which may carry the whitespace lstrip/rstrip took."""
        ids = self._added_ids.lookup(pieces)
        stripped = tf.strings.regex_replace(pieces, f"^[{WHITESPACE}]+|[{WHITESPACE}]+$", "")
        return tf.where(ids >= 0, ids, self._added_ids.lookup(stripped))

    def _pre_tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """[N] texts -> [N, (words)] as the ByteLevel pre-tokenizer splits them with GPT-2's
        pattern `...| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`. RE2 has no lookahead: each chunk
        (whitespace, then non-space) gives its whitespace but the last character as one word,
        then that last character alone, or, when it is a space, joined to the next word."""
        if self._add_prefix_space:  # per piece, when it is not empty and has none
            texts = tf.where(
                (texts == "") | tf.strings.regex_full_match(texts, " (?s:.)*"), texts, tf.strings.join([" ", texts])
            )
        if not self._use_regex:
            return _nonempty(texts)
        chunks = text.regex_split(texts, _CHUNK, _CHUNK)
        chunk = chunks.flat_values
        rest = tf.strings.regex_replace(chunk, f"^[{WHITESPACE}]+", "")
        space_length = tf.strings.length(chunk) - tf.strings.length(rest)
        space = tf.strings.substr(chunk, tf.zeros_like(space_length), space_length)
        head = tf.strings.regex_replace(space, f"^([{WHITESPACE}]*)[{WHITESPACE}]$", r"\1")
        last = tf.strings.substr(space, tf.strings.length(head), tf.strings.length(space))
        at_end = rest == ""  # the text's trailing whitespace: one word
        head, last = tf.where(at_end, space, head), tf.where(at_end, "", last)
        joined = last == " "
        rest = tf.where(joined, tf.strings.join([" ", rest]), rest)
        last = tf.where(joined, "", last)
        # Most chunks are one word: regex_split only the others (a third less CPU on tweets).
        one_word = tf.strings.regex_full_match(rest, _ONE_WORD)
        words = tf.concat(
            [
                _nonempty(head),
                _nonempty(last),
                _nonempty(tf.where(one_word, rest, "")),
                text.regex_split(tf.where(one_word, "", rest), _WORD, _WORD),
            ],
            axis=1,
        )
        return chunks.with_flat_values(words).merge_dims(1, 2)

    def _encode_words(self, words: tf.Tensor) -> tf.RaggedTensor:
        """[W] words -> [W, (ids)], merging each distinct word of the batch once."""
        distinct, index = tf.unique(tf.strings.regex_replace(words, _NUL, "\x00"))
        characters = tf.strings.bytes_split(distinct)
        symbols = characters.with_flat_values(self._byte_ids.lookup(characters.flat_values))
        if self._unknown_id >= 0:
            symbols = tf.ragged.map_flat_values(lambda ids: tf.where(ids >= 0, ids, self._unknown_id), symbols)
        else:  # Hugging Face's BPE drops a character outside its vocabulary when it has no unk
            symbols = tf.ragged.boolean_mask(symbols, symbols >= 0)
        return tf.gather(self._merge(symbols), index)

    def _merge(self, symbols: tf.RaggedTensor) -> tf.RaggedTensor:
        """Merges each word's lowest-rank pair, leftmost first, until none is left: Hugging
        Face's priority-queue order, one merge per word per step, on all words at once. A word
        with nothing left to merge leaves the loop, so long words do not make short ones
        pay for every step (1.8x the texts/s on tweets)."""
        rows, size, none = symbols.nrows(), self.vocab_size, tf.int64.max

        def step(values, rowids, done_values, done_rowids):
            pair_rows = rowids[:-1]
            codes = self._merges.lookup(values[:-1] * size + values[1:])
            codes = tf.where((pair_rows == rowids[1:]) & (codes >= 0), codes, none)
            best = tf.gather(tf.math.unsorted_segment_min(codes, pair_rows, rows), pair_rows)
            candidate = (codes == best) & (codes < none)
            positions = tf.range(tf.size(codes, out_type=tf.int64))
            first = tf.math.unsorted_segment_min(tf.where(candidate, positions, none), pair_rows, rows)
            merge = candidate & (positions == tf.gather(first, pair_rows))
            merged = tf.concat([tf.where(merge, codes % size, values[:-1]), values[-1:]], 0)
            keep = ~tf.concat([[False], merge], 0)
            values, rowids = tf.boolean_mask(merged, keep), tf.boolean_mask(rowids, keep)
            active = tf.gather(tf.math.unsorted_segment_max(tf.cast(merge, tf.int32), pair_rows, rows) > 0, rowids)
            return (
                tf.boolean_mask(values, active),
                tf.boolean_mask(rowids, active),
                tf.concat([done_values, tf.boolean_mask(values, ~active)], 0),
                tf.concat([done_rowids, tf.boolean_mask(rowids, ~active)], 0),
            )

        empty = tf.zeros([0], tf.int64)
        _, _, values, rowids = tf.while_loop(
            lambda values, *_: tf.size(values) > 0,
            step,
            (symbols.flat_values, symbols.value_rowids(), empty, empty),
            shape_invariants=(tf.TensorShape([None]),) * 4,
        )
        order = tf.argsort(rowids, stable=True)  # finished words, back in their order
        return tf.RaggedTensor.from_value_rowids(tf.gather(values, order), tf.gather(rowids, order), nrows=rows)


def _nonempty(strings: tf.Tensor) -> tf.RaggedTensor:
    """[N] -> [N, (0 or 1)]: each string as a one-word row, or an empty row for ""."""
    present = strings != ""
    return tf.RaggedTensor.from_row_lengths(tf.boolean_mask(strings, present), tf.cast(present, tf.int64))


def _split_added(pieces: tf.RaggedTensor, added: tf.RaggedTensor, pattern: str):
    """Splits the pieces that are not added tokens yet around the added tokens `pattern`
    matches; returns the [B, (pieces)] texts and whether each is an added token."""
    values, flags = pieces.flat_values, added.flat_values
    parts = text.regex_split(tf.where(flags, "", values), pattern, pattern)
    found = parts.with_flat_values(tf.strings.regex_full_match(parts.flat_values, pattern))
    kept = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(values, flags), tf.cast(flags, tf.int64))
    parts = tf.concat([kept, parts], axis=1)
    found = tf.concat([kept.with_flat_values(tf.ones_like(kept.flat_values, tf.bool)), found], axis=1)
    return (pieces.with_flat_values(parts).merge_dims(1, 2), added.with_flat_values(found).merge_dims(1, 2))
