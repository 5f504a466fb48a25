"""The in-graph SentencePiece tokenizer gives Hugging Face's fast tokenizer's ids, saved or not.

Tiny unigram models are trained here with the sentencepiece library, laid out as XLM-RoBERTa's
sentencepiece.bpe.model (<unk>, <s>, </s> first) and DeBERTa-v3's spm.model ([PAD], [CLS],
[SEP], [UNK] first); transformers builds its fast tokenizers from the same files.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from trainer.errors import UserError
from trainer.modeling.encoders.models import deberta_v2, roberta
from trainer.modeling.encoders.tokenizers.sentencepiece import SentencePieceTokenizer

# The families' layouts, by the name their errors give.
LAYOUTS = {"xlm-roberta": roberta.SENTENCEPIECE, "deberta-v3": deberta_v2.SENTENCEPIECE}
WORDS = (
    "the movie was great and i loved it , but the ending felt rushed . "
    "café naïve résumé façade jalapeño über straße smörgåsbord crème brûlée "
    "東京 タワー 北京 大学 서울 😀 🎉 👍🏽 ❤️ 2024 3.14 1,000,000 #1 @user "
    "!!! ??? ... --- ;) :-( \"quoted\" 'single' (parens) [brackets]"
).split()
XLMR_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
DEBERTA_SPECIALS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")
# Held out from training: whitespace of every kind, NFKC-only characters, special tokens
# written in the text, unknown characters and their runs.
TRICKY = [
    "",
    " ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    " leading",
    "trailing ",
    "  both  ends  ",
    "tabs\tand\nnew\r\nlines",
    "no\u00a0break",
    "a \u00a0 b",
    "ideographic\u3000space",
    "line\u2028separator",
    "next\u0085line",
    "zero\u200bwidth",
    "\ufeffbom",
    "x\x00nul",
    "bell\x07char",
    "Cafe\u0301 (combining)",
    "ﬁne ＡＢＣ １２３ …",
    "Ⅻ ǅ ß İstanbul",
    "!!!! ???? .... hahahaha",
    "▁metaspace ▁ a▁b",
    "東京タワーへ行きたい😀😀",
    "1234567890",
    "hi <mask> there",
    "<s>hi</s>",
    "x<pad>y <unk>",
    "[CLS] hi [SEP]",
    "a\u00a0[MASK]\u00a0b",
    "[PAD][PAD]",
    " [SEP] ",
    "<s><s>",
    "nul\x00then <s> [SEP]\x00end",
    "x" * 60,
]


def corpus():
    """A few hundred deterministic sentences over WORDS, with varied spacing, and runs of
    punctuation (so that "!", "!!", "!!!" ... are all pieces)."""
    sentences = []
    for i in range(300):
        words = [WORDS[(i * 7 + j * 13) % len(WORDS)] for j in range(3 + i % 9)]
        separator = "  " if i % 17 == 0 else "\t" if i % 23 == 0 else " "
        sentences.append(separator.join(words) + (" " if i % 11 == 0 else ""))
    return sentences + [f"wow{mark * (2 + i % 7)} ok" for i, mark in enumerate("!?." * 30)]


def _train(directory, filename, **options):
    import sentencepiece

    os.makedirs(directory)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()),
        model_prefix=os.path.join(directory, "m"),
        model_type=options.pop("model_type", "unigram"),
        vocab_size=120,
        hard_vocab_limit=False,
        character_coverage=0.98,
        minloglevel=2,
        **options,
    )
    os.replace(os.path.join(directory, "m.model"), os.path.join(directory, filename))
    return os.path.join(directory, filename)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """{family: (model file, Hugging Face fast tokenizer, our tokenizer)}."""
    import transformers

    root = tmp_path_factory.mktemp("sentencepiece")
    xlmr = _train(root / "xlmr", "sentencepiece.bpe.model")  # <unk>=0, <s>=1, </s>=2
    deberta = _train(
        root / "deberta",
        "spm.model",
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        pad_piece="[PAD]",
        bos_piece="[CLS]",
        eos_piece="[SEP]",
        unk_piece="[UNK]",
    )
    return {
        "xlm-roberta": (xlmr, transformers.XLMRobertaTokenizerFast.from_pretrained(root / "xlmr")),
        "deberta-v3": (deberta, transformers.DebertaV2TokenizerFast.from_pretrained(root / "deberta")),
    }


def ids(tokenizer, texts):
    return tokenizer.tokenize(tf.constant(texts)).to_list()


def hf_ids(hf, texts):
    return hf(texts, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("family", ["xlm-roberta", "deberta-v3"])
def test_ids_equal_hugging_face_fast_tokenizer_on_training_text(models, family):
    model_file, hf = models[family]
    texts = corpus()
    assert ids(SentencePieceTokenizer(model_file, LAYOUTS[family]), texts) == hf_ids(hf, texts)


@pytest.mark.parametrize("family", ["xlm-roberta", "deberta-v3"])
def test_ids_equal_hugging_face_fast_tokenizer_on_held_out_tricky_text(models, family):
    model_file, hf = models[family]
    got = ids(SentencePieceTokenizer(model_file, LAYOUTS[family]), TRICKY)
    assert {text: g for text, g in zip(TRICKY, got)} == dict(zip(TRICKY, hf_ids(hf, TRICKY)))


@pytest.mark.parametrize("family", ["xlm-roberta", "deberta-v3"])
def test_equally_scored_orders_of_a_run_are_hugging_faces(models, family):
    """ "!!!!!!!" is "!!" "!!!!!" or "!!!!!" "!!" at the same score: Hugging Face keeps the
    longest piece last, where TF-Text's float32 search picks either."""
    model_file, hf = models[family]
    runs = [
        f"{word}{mark * n}{end}"
        for word in ("", "day", "so ")
        for mark in "!?."
        for n in range(2, 13)
        for end in ("", " ok", "x")
    ]
    assert ids(SentencePieceTokenizer(model_file, LAYOUTS[family]), runs) == hf_ids(hf, runs)


@pytest.mark.parametrize("family", ["xlm-roberta", "deberta-v3"])
def test_batches_of_empty_texts_have_no_ids(models, family):
    tokenizer = SentencePieceTokenizer(models[family][0], LAYOUTS[family])
    assert [ids(tokenizer, batch) for batch in (["hi", ""], [""], [" ", "\t"])] == [
        [hf_ids(models[family][1], ["hi"])[0], []],
        [[]],
        [[], []],
    ]


@pytest.mark.parametrize("family,specials", [("xlm-roberta", XLMR_SPECIALS), ("deberta-v3", DEBERTA_SPECIALS)])
def test_special_token_ids_and_vocab_size_are_hugging_faces(models, family, specials):
    model_file, hf = models[family]
    tokenizer = SentencePieceTokenizer(model_file, LAYOUTS[family])
    assert tokenizer.vocab_size == len(hf)
    assert [tokenizer.token_to_id(t) for t in specials] == hf.convert_tokens_to_ids(list(specials))


@pytest.mark.parametrize("family", ["xlm-roberta", "deberta-v3"])
def test_the_whole_vocabulary_is_hugging_faces(models, family):
    """What the report maps attributed ids back to pieces with (explaining.words)."""
    model_file, hf = models[family]
    ours = SentencePieceTokenizer(model_file, LAYOUTS[family])
    assert {piece: ours.token_ids()[piece] for piece in hf.get_vocab()} == hf.get_vocab()


def test_xlm_roberta_ids_follow_fairseq_offset(models):
    """<s> <pad> </s> <unk> are 0-3, each other piece its SentencePiece id + 1, <mask> last."""
    import sentencepiece

    model_file, _ = models["xlm-roberta"]
    tokenizer = SentencePieceTokenizer(model_file, LAYOUTS["xlm-roberta"])
    processor = sentencepiece.SentencePieceProcessor(model_file=model_file)
    assert tokenizer.token_to_id(processor.id_to_piece(7)) == 8
    assert tokenizer.token_to_id("<mask>") == processor.get_piece_size() + 1


def test_unknown_token_is_a_user_error_naming_the_file(models):
    model_file, _ = models["deberta-v3"]
    with pytest.raises(UserError, match=f"{model_file}: no token <mask>"):
        SentencePieceTokenizer(model_file, LAYOUTS["deberta-v3"]).token_to_id("<mask>")


def test_a_file_that_is_not_a_sentencepiece_model_is_a_user_error(tmp_path):
    path = tmp_path / "spm.model"
    path.write_bytes(b"[PAD]\n[CLS]\n")
    with pytest.raises(UserError, match=f"{path}: not a SentencePiece model file"):
        SentencePieceTokenizer(str(path), LAYOUTS["deberta-v3"])


def test_a_model_of_the_other_family_is_a_user_error(models):
    model_file, _ = models["xlm-roberta"]
    with pytest.raises(UserError, match=f"{model_file}: not a deberta-v3 SentencePiece model"):
        SentencePieceTokenizer(model_file, LAYOUTS["deberta-v3"])


def test_a_bpe_model_is_a_user_error(tmp_path):
    model_file = _train(tmp_path / "bpe", "sentencepiece.bpe.model", model_type="bpe")
    with pytest.raises(UserError, match=f"{model_file}: a xlm-roberta model is a unigram"):
        SentencePieceTokenizer(model_file, LAYOUTS["xlm-roberta"])


RELOAD = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    texts = json.loads(sys.argv[2])
    result = {}
    for family in ("xlm-roberta", "deberta-v3"):
        module = tf.saved_model.load(f"{sys.argv[1]}/{family}")
        result[family] = module.tokenize(tf.constant(texts)).to_list()
        result[family + " asset"] = module.tokenizer.model_asset.asset_path.numpy().decode()
    print(json.dumps(result))
""")


@pytest.mark.slow  # a fresh process: CI runs it on 2.21 (.ci/run)
def test_savedmodel_reloads_in_a_fresh_process_with_the_same_ids(models, tmp_path):
    """Saved inside a tf.Module as the preprocessor export saves it; reloaded where only
    tensorflow and tensorflow_text are imported."""
    texts = corpus()[:20] + TRICKY
    for family, (model_file, _) in models.items():
        module = tf.Module()
        module.tokenizer = SentencePieceTokenizer(model_file, LAYOUTS[family])
        module.tokenize = tf.function(
            module.tokenizer.tokenize, autograph=False, input_signature=[tf.TensorSpec([None], tf.string)]
        )
        tf.saved_model.save(module, str(tmp_path / family))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    run = subprocess.run(
        [sys.executable, "-c", RELOAD, str(tmp_path), json.dumps(texts)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    result = json.loads(run.stdout.strip().splitlines()[-1])
    for family, (model_file, hf) in models.items():
        assert result[family] == hf_ids(hf, texts)
        assert result[family + " asset"] == str(tmp_path / family / "assets" / os.path.basename(model_file))


def hf_word_pieces(hf, words):
    """Hugging Face's pieces of each word, for words given with is_split_into_words=True."""
    encoded = hf(words, is_split_into_words=True, add_special_tokens=False)
    pieces = [[] for _ in words]
    for piece, word in zip(encoded["input_ids"], encoded.word_ids()):
        pieces[word].append(piece)
    return pieces


@pytest.mark.parametrize("family", ["xlm-roberta", "deberta-v3"])
def test_words_one_at_a_time_give_hugging_faces_pieces_of_split_words(models, family):
    """Token classification's alignment (tasks/tagging/word_pieces.py): each word's pieces, and
    so the first piece its tag is read at, as Hugging Face's word_ids() group them."""
    from trainer.modeling.encoders.preprocessing import SubwordPreprocessor

    model_file, hf = models[family]
    words = ["The", "café", "won", "3-2", "against", "Zoë", "!", "😀🎉", "東京タワー", "naïve"]
    special = {"xlm-roberta": roberta.SPECIAL, "deberta-v3": deberta_v2.SPECIAL}[family]
    ours = SubwordPreprocessor(SentencePieceTokenizer(model_file, LAYOUTS[family]), special)
    assert ours.tokenize_words(tf.constant(words)).to_list() == hf_word_pieces(hf, words)
