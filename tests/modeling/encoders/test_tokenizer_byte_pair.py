"""The byte-level BPE tokenizer gives Hugging Face's fast tokenizer's ids, as TensorFlow ops.

Both checkpoint layouts are trained with the `tokenizers` library on the sentences below, as
bench/tokenizer_parity.py trains them: RoBERTa's vocab.json + merges.txt, and a ModernBERT-style
tokenizer.json (NFC, ByteLevel, an lstrip [MASK]; here also a normalized added token). The
reference is transformers' fast tokenizer built from the same files,
`tokenizer(text, add_special_tokens=False)["input_ids"]`.
"""

import itertools
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf
import tf_keras
from conftest import ROOT

from trainer.errors import UserError
from trainer.modeling.encoders.models import roberta as roberta_family
from trainer.modeling.encoders.tokenizers.byte_pair import BytePairTokenizer, spec_from_tokenizer_json

sys.path.insert(0, os.path.join(ROOT, "bench"))
import tokenizer_parity  # noqa: E402

SUBJECTS = ["The café", "Mon ami Zoë", "我的朋友", "Our team 🚀", "She", "Ünïcödé text", "東京タワー"]
VERBS = [
    "really likes",
    "didn't see",
    "won 3-2 against",
    "paid $1,299.99 for",
    "can't stand",
    'said "hello" to',
    "is   waiting for",
]
OBJECTS = [
    "the naïve résumé!!!",
    "emoji 😀🎉👍🏽...",
    "the 2nd match?!?",
    "  spaced  words  ",
    "tabs\tand\nnewlines",
    "1234567890",
    "¿qué tal?",
    "日本語のテキスト。",
]
# Every subject-verb-object sentence, plus whitespace-only and empty texts: 400 in all.
SENTENCES = [" ".join(words) for words in itertools.product(SUBJECTS, VERBS, OBJECTS)] + [
    "",
    " ",
    "\t",
    "\n\n",
    "   leading",
    "trailing   ",
    "we're",
    "I'll",
    "you've",
    "it's",
]
# Held out: none of these is in the training text.
TRICKY = [
    "",
    " ",
    "  ",
    "trail  ",
    "  lead",
    "a  b",
    "x\n\ny",
    "a\r\n\r\nb",
    "tab\tx",
    " \n ",
    "don't  'sup",
    "I'M YOU'RE they'D",
    "Café ६ test",
    "\u00a0nbsp x",
    "x \u3000 y",
    "a\u2028b",
    "e\u0301 A\u030a",
    "\u212a kelvin",
    "ﬁne… ＡＢＣ™",
    "👩‍👩‍👧‍👦 family",
    "https://example.com/a_b?c=1&d=2",
    "!!!???...",
    "1.000.000,00 €",
    "<s>x</s>",
    "hello <mask> world",
    "[CLS]a [MASK] b",
    "a[MASK]b",
    "x  [MASK]  y",
    "|||LINK|||",
    "|||LIN\u212a|||",
    "long" * 40,
    "ʻokina Ελληνικά русский עברית",
    "nul\x00inside\x00\x00 it",
    "\x85\x85x \u2009\u2009y \x1c\x1cz",
]
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """{family: files} of both layouts, trained as bench/tokenizer_parity.py trains them."""
    from tokenizers import AddedToken

    return tokenizer_parity.train_byte_level_bpe(
        SENTENCES, 500, str(tmp_path_factory.mktemp("byte_pair")), added=[AddedToken("|||LINK|||", normalized=True)]
    )  # matched after NFC


@pytest.fixture(scope="module")
def roberta(trained):
    from transformers import RobertaTokenizerFast

    files = trained["roberta"]
    return (BytePairTokenizer.from_vocab_and_merges(*files, roberta_family.ADDED_TOKENS), RobertaTokenizerFast(*files))


@pytest.fixture(scope="module")
def modernbert_file(trained):
    return trained["modernbert"][0]


def hugging_face_ids(tokenizer, texts):
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def differences(ours, theirs, texts):
    """Eager: the same ops as in a graph (the SavedModel test runs one) without seconds of tracing."""
    got = ours.tokenize(tf.constant(texts)).to_list()
    expected = hugging_face_ids(theirs, texts)
    return [(text, a, b) for text, a, b in zip(texts, got, expected) if a != b]


def test_roberta_vocab_and_merges_give_hugging_faces_ids(roberta):
    ours, theirs = roberta
    assert differences(ours, theirs, SENTENCES + TRICKY) == []


def test_modernbert_tokenizer_json_gives_hugging_faces_ids(modernbert_file):
    from transformers import PreTrainedTokenizerFast

    theirs = PreTrainedTokenizerFast(tokenizer_file=modernbert_file)
    assert differences(BytePairTokenizer.from_tokenizer_json(modernbert_file), theirs, SENTENCES + TRICKY) == []


def test_merges_written_as_strings_read_as_pairs_do(modernbert_file, tmp_path):
    """tokenizers >= 0.20 writes merges ["a", "b"]; older tokenizer.json files, "a b"."""
    config = json.load(open(modernbert_file, encoding="utf-8"))
    pairs = [tuple(pair) for pair in config["model"]["merges"]]
    config["model"]["merges"] = [" ".join(pair) for pair in pairs]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    assert spec_from_tokenizer_json(str(path)).merges == pairs
    assert spec_from_tokenizer_json(modernbert_file).merges == pairs


def test_special_token_ids_and_vocab_size_are_hugging_faces(roberta):
    ours, theirs = roberta
    assert [ours.token_to_id(t) for t in ROBERTA_SPECIALS] == theirs.convert_tokens_to_ids(ROBERTA_SPECIALS)
    assert ours.vocab_size == len(theirs)
    with pytest.raises(UserError, match=r"vocab\.json: the vocabulary has no token '\[CLS\]'"):
        ours.token_to_id("[CLS]")


def test_the_whole_vocabulary_is_hugging_faces(roberta):
    """What the report maps attributed ids back to pieces with (explaining.words)."""
    ours, theirs = roberta
    assert ours.token_ids() == theirs.get_vocab()


@pytest.mark.parametrize(
    "section, setting, named",
    [
        ("normalizer", {"type": "Lowercase"}, "normalizer Lowercase"),
        ("pre_tokenizer", {"type": "Whitespace"}, "pre_tokenizer"),
        ("model", {"byte_fallback": True}, "model.byte_fallback=True"),
    ],
)
def test_settings_it_does_not_implement_are_refused(modernbert_file, tmp_path, section, setting, named):
    config = json.load(open(modernbert_file, encoding="utf-8"))
    config[section] = {**config[section], **setting} if section == "model" else setting
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    refused = rf"^{path}: the byte-level BPE tokenizer does not implement .*{named}"
    with pytest.raises(UserError, match=refused):
        BytePairTokenizer.from_tokenizer_json(str(path))


BYTE_LEVEL = '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": %s}, "pre_tokenizer": {"type": "ByteLevel"}}'


@pytest.mark.parametrize(
    "content, says",
    [
        ("[]", 'not a tokenizer.json \\(no "model" object\\)'),
        (BYTE_LEVEL % '[["a"]]', r"merge 1 is \['a'\], not two tokens"),
        (BYTE_LEVEL % '["a a"]', "merge 1 \\(a a\\) needs 'aa', which is not in the vocabulary"),
        (
            '{"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"content": "<s>"}]}',
            'added token {"content": "<s>"} needs a content and an id >= 0',
        ),
    ],
)
def test_malformed_files_are_refused_naming_the_file(tmp_path, content, says):
    path = tmp_path / "tokenizer.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=rf"^{path}: {says}$"):
        BytePairTokenizer.from_tokenizer_json(str(path))


class TokenizingLayer(tf_keras.layers.Layer):
    """How a family preprocessor holds the tokenizer."""

    def __init__(self, tokenizer):
        super().__init__(trainable=False)
        self.tokenizer = tokenizer

    def call(self, strings):
        return self.tokenizer.tokenize(strings)


@pytest.mark.slow  # a fresh process: CI runs it on 2.21 (.ci/run)
def test_savedmodel_reloads_in_a_fresh_process_with_the_same_ids(modernbert_file, tmp_path):
    """Saved as hub._PreprocessorExport saves a preprocessor: a tf.Module tracking the
    tokenizer, a tf.function without autograph; reloaded with only tensorflow and TF-Text."""
    layer = TokenizingLayer(BytePairTokenizer.from_tokenizer_json(modernbert_file))
    export = tf.Module()
    export.tokenizer = layer.tokenizer
    export.tokenize = tf.function(layer.call, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    tf.saved_model.save(export, str(tmp_path / "saved"))
    texts = SENTENCES[::7] + TRICKY
    script = (
        "import json, sys, tensorflow as tf, tensorflow_text\n"
        "texts = json.load(sys.stdin)\n"
        f"ids = tf.saved_model.load({str(tmp_path / 'saved')!r}).tokenize(tf.constant(texts))\n"
        "assert not [m for m in sys.modules if m.startswith(('trainer', 'tokenizers', 'keras_hub'))]\n"
        "print(json.dumps(ids.to_list()))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == layer(tf.constant(texts)).to_list()
    assert os.path.exists(tmp_path / "saved" / "assets" / "tokenizer.json")


def test_words_one_at_a_time_give_hugging_faces_pieces_of_split_words(roberta, trained):
    """Token classification's alignment (tasks/tagging/word_pieces.py): byte-level BPE reads
    each word after a space, as Hugging Face's add_prefix_space=True, and the pieces of each word
    are those its word_ids() group."""
    from transformers import RobertaTokenizerFast

    from trainer.modeling.encoders.preprocessing import SubwordPreprocessor

    words = ["The", "café", "won", "3-2", "against", "Zoë", "!", "😀🎉", "東京タワー", "naïve"]
    theirs = RobertaTokenizerFast(*trained["roberta"], add_prefix_space=True)
    encoded = theirs(words, is_split_into_words=True, add_special_tokens=False)
    expected = [[] for _ in words]
    for piece, word in zip(encoded["input_ids"], encoded.word_ids()):
        expected[word].append(piece)
    ours = SubwordPreprocessor(roberta[0], roberta_family.SPECIAL)
    assert ours.tokenize_words(tf.constant(words)).to_list() == expected
