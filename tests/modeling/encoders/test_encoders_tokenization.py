"""The native preprocessor tokenizes like BERT's reference WordPiece and packs like TF-Hub's.

The reference below is an independent pure-Python BasicTokenizer + WordPiece written from
Google's tokenization.py / Hugging Face's BertTokenizer rules (transformers is not a
dependency). It runs over the real all-MiniLM-L6-v2 vocabulary from the installed package, and
gives the ids of Hugging Face's own `tokenizers` (a test dependency) on every tricky string.
"""

import os
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from trainer.modeling.encoders import registry
from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

VOCAB_FILE = os.path.join(registry.packaged_default_dir(), "vocab.txt")


def _is_punctuation(char):
    code = ord(char)
    return (
        33 <= code <= 47
        or 58 <= code <= 64
        or 91 <= code <= 96
        or 123 <= code <= 126
        or unicodedata.category(char).startswith("P")
    )


def _is_cjk(char):
    code = ord(char)
    return any(
        low <= code <= high
        for low, high in [
            (0x4E00, 0x9FFF),
            (0x3400, 0x4DBF),
            (0x20000, 0x2A6DF),
            (0x2A700, 0x2B73F),
            (0x2B740, 0x2B81F),
            (0x2B820, 0x2CEAF),
            (0xF900, 0xFAFF),
            (0x2F800, 0x2FA1F),
        ]
    )


def reference_basic_tokenize(text, lower_case=True):
    """BertNormalizer's clean_text deletes U+FFFD and every "other" character (Cc, Cf, Co, Cn) but
    tab, newline and carriage return; its lowercase maps one character at a time (Σ is σ even
    at the end of a word, where str.lower gives ς)."""
    cleaned = []
    for char in text:
        if char in "\t\n\r" or unicodedata.category(char) == "Zs":
            cleaned.append(" ")
        elif not unicodedata.category(char).startswith("C") and char != "\ufffd":
            cleaned.append(f" {char} " if _is_cjk(char) else char)
    words = []
    for word in "".join(cleaned).split():
        if lower_case:
            word = "".join(
                c
                for c in unicodedata.normalize("NFD", "".join(map(str.lower, word)))
                if unicodedata.category(c) != "Mn"
            )
        current = ""
        for char in word:
            if _is_punctuation(char):
                words += [current, char] if current else [char]
                current = ""
            else:
                current += char
        if current:
            words.append(current)
    return words


def reference_wordpiece(word, vocab, max_chars=100):
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


@pytest.fixture(scope="module")
def vocab():
    with open(VOCAB_FILE, encoding="utf-8") as f:
        return {token: index for index, token in enumerate(f.read().splitlines())}


def reference_ids(text, vocab, seq_length):
    tokens = [piece for word in reference_basic_tokenize(text) for piece in reference_wordpiece(word, vocab)]
    ids = [vocab["[CLS]"]] + [vocab[t] for t in tokens[: seq_length - 2]] + [vocab["[SEP]"]]
    return ids + [vocab["[PAD]"]] * (seq_length - len(ids))


TRICKY_STRINGS = {
    "accents": "Héllo Wörld! Café crème brûlée, naïve façade.",  # stripped when lower-casing
    "punctuation": "Don't stop—it's 5:30 p.m., right?! (yes) [no] {maybe}",
    "ascii-symbols": "$100 + 50% = ~great~ <b>bold</b> @user #hashtag a|b `code` ^_^",
    "emoji": "I love it 😀🎉 so much",  # neither punctuation nor in the vocab: [UNK]
    "unknown-words": "xqzvbnm floccinaucinihilipilification unbelievably",  # ## pieces
    "cjk": "Tokyo 東京 and 北京 are cities",  # CJK characters become one-character words
    "whitespace": "  multiple   spaces\tand\nnewlines  ",
    "over-long-word": "a" * 150,  # a word over 100 characters is a single [UNK]
    "over-length-input": "over-length input " * 40,  # truncated, still ending in [SEP]
    # Deleted, not word breaks (issue #66); TF-Text stopped reading a text at its NUL.
    "nul": "before nul\x00after it",
    "zwj-emoji": "family 👩\u200d👩\u200d👧 and 👍🏽 ok",
    "soft-hyphen": "soft\u00adhyphen",
    "zero-width-space-and-bom": "zero\u200bwidth \ufeffbom",
    "c1-controls": "next\x85line trial\x97at mis\x92decoded",
    "private-use-and-replacement": "private\ue000use re\ufffdplaced",
    "final-sigma": "ΟΔΥΣΣΕΥΣ Σ",  # σ at the end of a word too
}


def test_the_reference_gives_hugging_faces_ids(vocab):
    """BertNormalizer (clean_text, lowercase, strip_accents), BertPreTokenizer and WordPiece of
    the `tokenizers` library over the same vocabulary, as BertTokenizerFast builds them."""
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    theirs = [e.ids for e in tokenizer.encode_batch(list(TRICKY_STRINGS.values()))]
    ours = [
        [vocab[piece] for word in reference_basic_tokenize(text) for piece in reference_wordpiece(word, vocab)]
        for text in TRICKY_STRINGS.values()
    ]
    assert dict(zip(TRICKY_STRINGS, ours)) == dict(zip(TRICKY_STRINGS, theirs))


@pytest.mark.parametrize("text", TRICKY_STRINGS.values(), ids=TRICKY_STRINGS.keys())
def test_ids_match_reference_wordpiece(text, vocab):
    preprocessor = WordPiecePreprocessor(VOCAB_FILE, lower_case=True, seq_length=48)
    packed = preprocessor(tf.constant([text]))
    np.testing.assert_array_equal(packed["input_word_ids"][0], reference_ids(text, vocab, 48))


def test_lower_casing_applies_no_nfkc_as_hugging_face_applies_none(vocab):
    """TF-Text's own lower-casing (FastBertTokenizer's lower_case_nfd_strip_accents, BertTokenizer's
    case_fold_utf8) is NFKC-based: ligatures, ellipses and full-width letters would normalise
    first. The preprocessor lower-cases and strips accents as Hugging Face's BertNormalizer does."""
    text = "ﬁne… ＡＢＣ™"
    preprocessor = WordPiecePreprocessor(VOCAB_FILE, lower_case=True, seq_length=16)
    ids = preprocessor(tf.constant([text]))["input_word_ids"][0].numpy().tolist()
    assert ids == reference_ids(text, vocab, 16)
    assert ids != reference_ids(unicodedata.normalize("NFKC", text), vocab, 16)


def test_mask_and_type_ids_of_a_single_segment(vocab):
    preprocessor = WordPiecePreprocessor(VOCAB_FILE, lower_case=True, seq_length=8)
    packed = preprocessor(tf.constant(["good movie"]))
    np.testing.assert_array_equal(packed["input_mask"][0], [1, 1, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(packed["input_type_ids"][0], [0] * 8)
    assert {key: value.dtype for key, value in packed.items()} == {
        "input_word_ids": tf.int32,
        "input_mask": tf.int32,
        "input_type_ids": tf.int32,
    }


def test_pairs_pack_as_cls_a_sep_b_sep_trimmed_longest_first(vocab):
    """As Hugging Face's fast tokenizer: each text keeps half when both are too long, the
    second the odd token (TF-Hub's round-robin gave it to the first)."""
    preprocessor = WordPiecePreprocessor(VOCAB_FILE, lower_case=True, seq_length=10)
    first = preprocessor.tokenize(tf.constant(["one two three four five six"]))
    second = preprocessor.tokenize(tf.constant(["red green blue black white pink"]))
    packed = preprocessor.bert_pack_inputs([first, second])
    words = "[CLS] one two three [SEP] red green blue black [SEP]".split()
    np.testing.assert_array_equal(packed["input_word_ids"][0], [vocab[w] for w in words])
    np.testing.assert_array_equal(packed["input_type_ids"][0], [0] * 5 + [1] * 5)
    np.testing.assert_array_equal(packed["input_mask"][0], [1] * 10)


def test_bert_pack_inputs_takes_a_seq_length_per_call(vocab):
    preprocessor = WordPiecePreprocessor(VOCAB_FILE, lower_case=True, seq_length=128)
    tokens = preprocessor.tokenize(tf.constant(["a b c d e f", "a"]))
    assert preprocessor.bert_pack_inputs([tokens], seq_length=5)["input_word_ids"].shape == [2, 5]
    assert preprocessor(tf.constant(["a"]))["input_word_ids"].shape == [1, 128]


def test_tokenize_returns_wordpieces_per_word(vocab):
    preprocessor = WordPiecePreprocessor(VOCAB_FILE, lower_case=True)
    tokens = preprocessor.tokenize(tf.constant(["unbelievably good"]))
    expected = [[vocab[p] for p in reference_wordpiece(w, vocab)] for w in ("unbelievably", "good")]
    assert tokens.to_list() == [expected]


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_words_and_their_pieces_match_the_reference(vocab, lower_case):
    """The word dimension is rebuilt from "##" continuations: the reference's words, in a
    batch that also holds an empty text; cased, a no-break space separates words as in HF."""
    texts = [*TRICKY_STRINGS.values(), "", "no\u00a0break space"]
    preprocessor = WordPiecePreprocessor(VOCAB_FILE, lower_case=lower_case)
    expected = [
        [[vocab[p] for p in reference_wordpiece(word, vocab)] for word in reference_basic_tokenize(text, lower_case)]
        for text in texts
    ]
    assert preprocessor.tokenize(tf.constant(texts)).to_list() == expected
