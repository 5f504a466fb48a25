"""WordPiece (BERT, ELECTRA, MPNet): TF-Text's FastBertTokenizer over a vocab.txt, as a
preprocessor layer. A family passes its special tokens (`special`); BERT's are the default.
"""

import dataclasses

import tensorflow as tf
import tensorflow_text as text

from trainer.errors import UserError
from trainer.modeling.encoders.preprocessing import PackingPreprocessor, SpecialTokens

# Google's WordPiece vocabularies' special tokens, packed `[CLS] a [SEP] b [SEP]` (BERT's).
BERT = SpecialTokens("[PAD]", "[UNK]", "[CLS]", "[SEP]")
# What Hugging Face's BertNormalizer (clean_text) deletes: NUL, U+FFFD and every Unicode "other"
# character (Cc, Cf, Co, Cn) but tab, newline and carriage return (tokenizers' normalizers/bert.rs).
_DELETED = r"[^\P{C}\t\n\r]|\x{FFFD}"


def check_vocab(vocab_file: str, special: SpecialTokens = BERT) -> list[str]:
    """The vocabulary's tokens, one per line; a UserError when it is not UTF-8 or lacks one of
    the `special` tokens."""
    with tf.io.gfile.GFile(vocab_file, "rb") as f:
        raw = f.read()
    try:
        vocab = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise UserError(f"{vocab_file}: not valid UTF-8 (byte {raw[e.start]:#04x} at offset {e.start})") from None
    missing = [token for token in special.names() if token not in vocab]
    if missing:
        raise UserError(f"{vocab_file}: the vocabulary lacks {', '.join(missing)}")
    return vocab


class WordPiecePreprocessor(PackingPreprocessor):
    """tf.string [B] -> int32 [B, seq_length] input_word_ids / input_mask / input_type_ids.

    Tokenizes with TF-Text's FastBertTokenizer (linear-time WordPiece, arXiv:2012.15524): on
    tweets it gives BertTokenizer's ids several times faster (bench/tokenizer_speed.py), and with
    lower_case=False it splits on no-break spaces as Hugging Face's tokenizer does, where
    BertTokenizer makes [UNK] of the words around one. Its models are constants in the graph,
    so a model saved with this layer inside reloads in a fresh process with only `import
    tensorflow, tensorflow_text`; the vocabulary file still ships in assets/ for people and
    tools that map ids back to wordpieces.

    With lower_case=True the text is lower-cased, decomposed (NFD) and stripped of its accents
    (combining marks) before FastBertTokenizer sees it, as Hugging Face's BertNormalizer does:
    FastBertTokenizer's own lower_case_nfd_strip_accents also applies NFKC ("…" -> "...",
    "´" -> " ́"), which Hugging Face does not (2 of 1,500 MRPC dev pairs came out different;
    bench/pair_parity.py). The ids then equal Hugging Face's fast tokenizer's.

    Before that, cased or not, the characters BertNormalizer deletes are deleted (`_DELETED`:
    control and format characters, private use, U+FFFD): FastBertTokenizer would split words at
    them (a soft hyphen, a zero-width joiner inside an emoji sequence, the C1 controls of
    mis-decoded cp1252 text) and stop reading a text at a NUL (issue #66: 2 of 14,284 tweets and
    7 of 2,000 IMDB reviews came out different). And Σ lower-cases to σ wherever it stands, as
    BertNormalizer lower-cases one character at a time, not to ICU's word-final ς.
    """

    def __init__(
        self, vocab_file: str, lower_case: bool, seq_length: int = 128, special: SpecialTokens = BERT, **kwargs
    ):
        kwargs["trainable"] = False  # nothing to train; also when rebuilt from get_config
        super().__init__(**kwargs)
        special = SpecialTokens(**special) if isinstance(special, dict) else special
        vocab = check_vocab(vocab_file, special)
        self.vocab_file = vocab_file
        self.lower_case = lower_case
        self.seq_length = seq_length
        self.special = special
        self.vocab_size = len(vocab)
        self.special_ids = {token: vocab.index(token) for token in (*special.names(), *special.pair_separator)}
        self._tokenizer = text.FastBertTokenizer(
            vocab=vocab, token_out_type=tf.int32, unknown_token=special.unknown, lower_case_nfd_strip_accents=False
        )
        self.vocab_asset = tf.saved_model.Asset(vocab_file)
        self.assets = [self.vocab_asset]
        self._continues_word = tf.constant([token.startswith("##") for token in vocab])

    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """[B] strings -> int32 RaggedTensor [B, (words), (wordpieces)], as TF-Hub's `tokenize`.

        FastBertTokenizer returns each text's wordpieces in one row; a word begins at every
        piece that is not a "##" continuation (a word WordPiece cannot split is one [UNK])."""
        strings = tf.strings.regex_replace(strings, _DELETED, "")
        if self.lower_case:
            strings = tf.strings.regex_replace(strings, "Σ", "σ")
            strings = tf.strings.regex_replace(
                text.normalize_utf8(tf.strings.lower(strings, encoding="utf-8"), "NFD"), r"\p{Mn}", ""
            )
        pieces = self._tokenizer.tokenize(strings)
        starts = tf.cast(~tf.gather(self._continues_word, pieces.flat_values), tf.int64)
        words = tf.RaggedTensor.from_value_rowids(
            pieces.flat_values, tf.cumsum(starts) - 1, nrows=tf.reduce_sum(starts)
        )
        words_per_text = tf.reduce_sum(pieces.with_flat_values(starts), axis=1)
        return tf.RaggedTensor.from_row_lengths(words, words_per_text)

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_file": self.vocab_file,
            "lower_case": self.lower_case,
            "seq_length": self.seq_length,
            "special": dataclasses.asdict(self.special),
        }
