"""SentencePiece (unigram) tokenization, in the graph, with Hugging Face's ids: XLM-RoBERTa's
and DeBERTa-v3's, each family's layout (`SentencePieceLayout`) given by its record in models/.

Built on TF-Text's FastSentencepieceTokenizer, which runs the unigram model's Viterbi search
as SentencePiece and Hugging Face's tokenizers do; what Hugging Face's fast tokenizer does
around that search is reproduced here with TF-Text and tf.strings ops:

- special tokens written in the text (`<mask>`, `[SEP]`, ...) are the special token's id, and
  the text on either side of one is tokenized on its own (Hugging Face's added-token split);
- MODEL_NORMALIZER (XLM-RoBERTa) keeps the model's own normalizer (the precompiled NFKC map
  Hugging Face also applies) but splits words at every Unicode whitespace character, as Hugging
  Face's WhitespaceSplit does, also at the ones that map leaves alone (U+0085);
- METASPACE (DeBERTa-v3's DebertaV2Tokenizer) keeps the model's own normalizer too where the
  model file has a precompiled map, as transformers does since 5.25.0 (Precompiled, Strip,
  Replace(" {2,}"), then Metaspace: SentencePiece's own ids), and splits nowhere else; for a
  model file without one (and before 5.25.0, for every model file) transformers collapses
  whitespace runs, applies NFC and strips the end of the text instead, so there the model
  proto's normalizer is switched off and those steps run as regex and NFC ops before it;
- where several orders of the same pieces score the same ("." "..." or "..." "." for
  "...."), Hugging Face's order: the longest piece last.
"""

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tensorflow_text as text
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from trainer.errors import UserError

# What Rust's char::is_whitespace and Oniguruma's Unicode \s match (the White_Space property):
# Hugging Face's WhitespaceSplit, Strip and Replace(r"\s") use them; RE2's \s is ASCII only.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
METASPACE = "\u2581"
UNIGRAM = 1  # sentencepiece_model.proto TrainerSpec.ModelType
CUT = b"\xff"  # a byte no UTF-8 text holds

# How Hugging Face normalizes a text segment around the model (see the module docstring).
MODEL_NORMALIZER, METASPACE = "model", "metaspace"


@dataclasses.dataclass(frozen=True)
class SentencePieceLayout:
    """What a family adds to the shared algorithm, as KerasHub's family tokenizers add theirs."""

    family: str  # what errors call a model of this layout
    # The special tokens Hugging Face matches in raw text, in its id order.
    specials: tuple[str, ...]
    # The pieces the model file must start with, as the family's checkpoints do.
    leading_pieces: tuple[str, ...]
    # The model's pieces -> (Hugging Face's tokens by id, SentencePiece id -> Hugging Face id,
    # or None where they are equal): the family's id layout.
    vocabulary: Callable[[list[str]], tuple[list[str], np.ndarray | None]]
    normalizer: str  # MODEL_NORMALIZER or METASPACE


class SentencePieceTokenizer(tf.Module):
    """tf.string [B] -> int32 RaggedTensor [B, (tokens)]: `tokenizer(text,
    add_special_tokens=False)["input_ids"]` of transformers' XLMRobertaTokenizer or
    DebertaV2Tokenizer built from the same model file.

    Why this design (tests/modeling/encoders/test_tokenizer_sentencepiece.py and bench/tokenizer_parity.py
    measure it): TF-Text's FastSentencepieceTokenizer gives the SentencePiece library's own
    ids (on 12,284 tweets with a 600-piece model, 9 differ from Hugging Face's, as the
    library's do), where TF-Text's SentencepieceTokenizer gives 194 more differences; its model
    is a uint8 constant in the graph (no resource), so a SavedModel holding this module reloads
    with only `import tensorflow, tensorflow_text`, and `model_asset` ships the model file
    beside it. Those 9 are equally scored orders of a run ("..." "." for "....", see
    _order_ties); alone it also misses special tokens written in the text, U+0085 (XLM-R) and,
    for a DeBERTa-v3 model file without a precompiled map, Hugging Face's whitespace and NFC
    steps. With the steps above, the ids equal Hugging Face's on those tweets and on every code
    point between two letters, alone and doubled.

    The ids are laid out as `layout.vocabulary` says (the family's record).
    """

    # A word tokenized alone gets the model's "▁" word start by itself, as Hugging Face's words
    # given with is_split_into_words=True do (token classification).
    word_prefix = ""

    def __init__(self, model_file: str, layout: SentencePieceLayout, name=None):
        super().__init__(name=name)
        family = layout.family
        with tf.io.gfile.GFile(model_file, "rb") as f:
            proto = f.read()
        model = _parse(proto, model_file)
        if model.trainer_spec.model_type != UNIGRAM:
            raise UserError(
                f"{model_file}: a {family} model is a unigram SentencePiece model; "
                f"this one is not (model_type {model.trainer_spec.model_type})"
            )
        pieces = [piece.piece for piece in model.pieces]
        leading = layout.leading_pieces
        if tuple(pieces[: len(leading)]) != leading:
            raise UserError(
                f"{model_file}: not a {family} SentencePiece model (its first pieces "
                f"are {', '.join(pieces[: len(leading)])}, not {', '.join(leading)})"
            )
        # transformers' DebertaV2Tokenizer without a precompiled map: its own steps (_normalize).
        self._nfc_first = layout.normalizer == METASPACE and not model.normalizer_spec.precompiled_charsmap
        if self._nfc_first:
            proto = _without_normalizer(model)
        self._sentencepiece = text.FastSentencepieceTokenizer(proto)
        self._vocab, self._id_map = _vocabulary(*layout.vocabulary(pieces))
        self.vocab_size = len(self._vocab)
        self._roots, self._powers = _powers_of_roots(self._vocab, self.vocab_size)
        specials = sorted(layout.specials, key=len, reverse=True)  # longest first
        self._special_tokens = np.array(specials, dtype=object)
        self._special_ids = np.array([self._vocab[token] for token in specials], np.int32)
        self._special_pattern = "|".join(_re2_literal(token) for token in specials)
        self._split_at = (
            _unsplit_whitespace(self._sentencepiece, pieces) if layout.normalizer == MODEL_NORMALIZER else ""
        )
        self._model_file = model_file
        self.model_asset = tf.saved_model.Asset(model_file)

    def token_ids(self) -> dict[str, int]:
        """piece -> id of the whole vocabulary (the report maps attributed ids back to pieces)."""
        return dict(self._vocab)

    def token_to_id(self, token: str) -> int:
        """The id of `token` (a special token or a piece), for packing at build time."""
        if token not in self._vocab:
            raise UserError(f"{self._model_file}: no token {token}")
        return self._vocab[token]

    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """[B] strings -> int32 [B, (tokens)], special tokens in the text included."""
        segments = self._segments(tf.convert_to_tensor(strings, tf.string))
        flat = segments.flat_values
        matches = tf.equal(flat[:, None], tf.constant(self._special_tokens)[None, :])
        is_special = tf.reduce_any(matches, axis=1)
        special_ids = tf.gather(tf.constant(self._special_ids), tf.argmax(tf.cast(matches, tf.int32), axis=1))
        pieces = self._sentencepiece.tokenize(self._normalize(tf.where(is_special, "", flat)))
        pieces = pieces.with_row_splits_dtype(tf.int64)
        ids = (
            pieces
            if self._id_map is None
            else pieces.with_flat_values(tf.gather(tf.constant(self._id_map), pieces.flat_values))
        )
        special = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(special_ids, is_special), tf.cast(is_special, tf.int64)
        )
        ids = segments.with_flat_values(tf.concat([ids, special], axis=1)).merge_dims(1, 2)
        return self._order_ties(ids)

    def _order_ties(self, ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """Consecutive powers of one string ("." "..." of "....") in ascending length.

        Every order of them scores the same, and Hugging Face's Viterbi keeps, at each end
        position, the piece that starts first among equal scores: the longest last. The
        SentencePiece search in TF-Text sums its scores in float32 and so picks among such
        ties by rounding (on 12,284 tweets with a 600-piece model: 9 runs of dots and question
        marks, "..." "." where Hugging Face gives "." "...")."""
        flat = ids.flat_values
        roots = tf.gather(tf.constant(self._roots), flat)
        rows = ids.value_rowids()
        starts = (roots < 0) | tf.not_equal(roots, _previous(roots)) | tf.not_equal(rows, _previous(rows))
        runs = tf.cumsum(tf.cast(starts, tf.int64))
        powers = tf.cast(tf.gather(tf.constant(self._powers), flat), tf.int64)
        order = tf.argsort(runs * (int(self._powers.max()) + 1) + powers, stable=True)
        return ids.with_flat_values(tf.gather(flat, order))

    def _segments(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """[B] -> [B, (segments)]: the special tokens written in each text and the text
        between them (maybe empty), as Hugging Face's added-token split cuts it.

        Cut at a 0xFF byte, which UTF-8 text never holds, put around each special token:
        TF-Text's regex_split would read a text only up to its first NUL character."""
        marked = tf.strings.regex_replace(strings, self._special_pattern, CUT + b"\\0" + CUT)
        return tf.strings.split(marked, sep=CUT).with_row_splits_dtype(tf.int64)

    def _normalize(self, segments: tf.Tensor) -> tf.Tensor:
        """What Hugging Face does to a text segment before the model and SentencePiece's
        normalizer does not."""
        if not self._nfc_first:
            return tf.strings.regex_replace(segments, self._split_at, " ") if self._split_at else segments
        # DebertaV2Tokenizer: Replace(r"\s{2,}|[\n\r\t]", " "), NFC, Strip(right), Metaspace.
        whitespace = _re2_class(WHITESPACE)
        segments = tf.strings.regex_replace(segments, f"{whitespace}{{2,}}|[\\n\\r\\t]", " ")
        segments = text.normalize_utf8(segments, "NFC")
        segments = tf.strings.regex_replace(segments, f"{whitespace}+$", "")
        segments = tf.strings.regex_replace(segments, " ", METASPACE)
        # Metaspace(prepend_scheme="always") adds "▁" unless the text already starts with one.
        return tf.where(tf.strings.regex_full_match(segments, f"(?s)({METASPACE}.*)?"), segments, METASPACE + segments)


def _previous(values: tf.Tensor) -> tf.Tensor:
    """values shifted one place right, -1 first (for an empty tensor too)."""
    return tf.pad(values, [[1, 0]], constant_values=-1)[:-1]


def _vocabulary(tokens: list[str], id_map: np.ndarray | None) -> tuple[dict[str, int], np.ndarray | None]:
    """(Hugging Face's token -> id, the id map) of a layout's tokens by id; a token listed twice
    keeps its first id."""
    vocab = {}
    for i, token in enumerate(tokens):
        vocab.setdefault(token, i)
    return vocab, id_map


def _powers_of_roots(vocab: dict[str, int], size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per id: a number for its primitive root u where the token is u^k and some other power
    of u is a token too (else -1), and k."""
    roots, powers = np.full(size, -1, np.int32), np.ones(size, np.int32)
    by_root: dict[str, list] = {}
    for token, i in vocab.items():
        period = (token + token).find(token, 1)  # the shortest u with token = u^k
        by_root.setdefault(token[:period], []).append(i)
        powers[i] = len(token) // period if token else 1
    for number, ids in enumerate(ids for ids in by_root.values() if len(ids) > 1):
        roots[ids] = number
    return roots, powers


def _unsplit_whitespace(sentencepiece: text.FastSentencepieceTokenizer, pieces: list) -> str:
    """An RE2 class of the whitespace characters the model's normalizer leaves in the text,
    where Hugging Face's WhitespaceSplit still splits words (U+0085 with nmt_nfkc); "" if none.

    Probed through the model itself, around a letter x that is a piece (so no unknown-character
    run hides the difference): a character it turns into a space tokenizes "x?x" as "x x", one
    it deletes as "xx"; any other is kept and must become a space here."""
    x = next((p for p in pieces if len(p) == 1 and p.isascii() and p.isalnum()), "x")
    probes = [f"{x} {x}", f"{x}{x}"] + [f"{x}{c}{x}" for c in WHITESPACE]
    ids = sentencepiece.tokenize(tf.constant(probes))
    if not tf.executing_eagerly():  # a check in a throwaway graph (checkpoints.check_directory)
        with tf.compat.v1.Session() as session:  # leaves the eager runtime unstarted
            ids = session.run(ids)
    ids = ids.to_list()
    kept = [c for c, got in zip(WHITESPACE, ids[2:]) if got not in ids[:2]]
    return _re2_class(kept) if kept else ""


def _re2_escape(char: str) -> str:
    return char if char.isalnum() else f"\\x{{{ord(char):x}}}"


def _re2_literal(token: str) -> str:
    return "".join(map(_re2_escape, token))


def _re2_class(chars) -> str:
    return "[" + "".join(map(_re2_escape, chars)) + "]"


def _model_proto_class():
    """sentencepiece_model.proto's ModelProto, as far as it is read or rewritten here (pieces,
    trainer_spec.model_type, normalizer_spec, self_test_data), as a protobuf class: the other
    fields pass through parsing and serializing unchanged, and the sentencepiece package is not
    needed at run time."""
    file = descriptor_pb2.FileDescriptorProto(
        name="vbt_sentencepiece_model.proto", package="vbt_sentencepiece", syntax="proto2"
    )
    field = descriptor_pb2.FieldDescriptorProto
    piece = file.message_type.add(name="SentencePiece")
    piece.field.add(name="piece", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    trainer = file.message_type.add(name="TrainerSpec")
    trainer.field.add(
        name="model_type", number=3, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL, default_value=str(UNIGRAM)
    )
    spec = file.message_type.add(name="NormalizerSpec")
    for number, name, kind in (
        (1, "name", field.TYPE_STRING),
        (2, "precompiled_charsmap", field.TYPE_BYTES),
        (3, "add_dummy_prefix", field.TYPE_BOOL),
        (4, "remove_extra_whitespaces", field.TYPE_BOOL),
    ):
        spec.field.add(name=name, number=number, type=kind, label=field.LABEL_OPTIONAL)
    model = file.message_type.add(name="ModelProto")
    model.field.add(
        name="pieces",
        number=1,
        type=field.TYPE_MESSAGE,
        type_name=".vbt_sentencepiece.SentencePiece",
        label=field.LABEL_REPEATED,
    )
    model.field.add(
        name="trainer_spec",
        number=2,
        type=field.TYPE_MESSAGE,
        type_name=".vbt_sentencepiece.TrainerSpec",
        label=field.LABEL_OPTIONAL,
    )
    model.field.add(
        name="normalizer_spec",
        number=3,
        type=field.TYPE_MESSAGE,
        type_name=".vbt_sentencepiece.NormalizerSpec",
        label=field.LABEL_OPTIONAL,
    )
    model.field.add(name="self_test_data", number=4, type=field.TYPE_BYTES, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("vbt_sentencepiece.ModelProto"))


def _parse(proto: bytes, model_file: str):
    try:
        model = _model_proto_class().FromString(proto)
    except Exception:  # protobuf's DecodeError, whichever implementation raises it
        model = None
    if model is None or not model.pieces:
        raise UserError(f"{model_file}: not a SentencePiece model file")
    return model


def _without_normalizer(model) -> bytes:
    """The model proto with SentencePiece's normalizer off (identity, no dummy prefix, spaces
    kept): the text arrives normalized and "▁"-marked as Hugging Face's pre-tokenizer leaves it.
    Its self-test samples, tokenized with the old normalizer, are dropped."""
    spec = model.normalizer_spec
    spec.name, spec.precompiled_charsmap = "identity", b""
    spec.add_dummy_prefix = spec.remove_extra_whitespaces = False
    model.ClearField("self_test_data")
    return model.SerializeToString()
