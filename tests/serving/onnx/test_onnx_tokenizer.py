"""An ONNX copy's tokenizer (trainer/serving/onnx: tokenizer_files.py writes tokenizer.json and
packing.json at export, packing.py reads them without TensorFlow) gives the features of the
SavedModel's `tokenize` (input_pipeline.encode with the run's preprocessor), for every family.

The families' tokenizer files are the tiny ones tests/modeling/encoders/test_encoder_families.py reads (written by
tests/reference_<family>.py), and the default encoder's vocabulary for BERT.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from conftest import ROOT

from trainer.data import input_pipeline
from trainer.errors import UserError
from trainer.modeling.encoders import families, registry
from trainer.serving.onnx import packing, tokenizer_files

# family: (the tests' fixture module writing its tokenizer files, or None for the default
# encoder's vocab.txt; its config.json model_type; lower_case)
FAMILIES = {
    "bert": (None, "bert", True),
    "bert-cased": (None, "bert", False),
    "mpnet": ("reference_mpnet", "mpnet", True),
    "roberta": ("reference_roberta", "roberta", False),
    "modernbert": ("reference_modernbert", "modernbert", False),
    "xlm-roberta": ("reference_xlm_roberta", "xlm-roberta", False),
    "deberta-v3": ("reference_deberta_v2", "deberta-v2", False),
}
HARD = [
    "",
    " ",
    "Héllo Wörld! Café crème brûlée, naïve façade.",
    "I love it 😀🎉 so much",
    "family 👩\u200d👩\u200d👧 and 👍🏽 ok",
    "Tokyo 東京 and 北京 are cities 서울",
    "  runs   of\tspaces\nand\r\nnewlines  ",
    "no\u00a0break\u3000ideographic\u2028line",
    "before nul\x00after it",
    "bell\x07 esc\x1b[0m next\x85line soft\u00adhyphen zero\u200bwidth",
    "ΟΔΥΣΣΕΥΣ ﬁne… ＡＢＣ",
    "[CLS] <s> hi </s> <mask> [SEP] [MASK]",
    "floccinaucinihilipilification " + "x" * 150,
    "the movie was great , i loved it " * 6,
]


@pytest.fixture(scope="module")
def directories(tmp_path_factory):
    """family -> the directory of its tokenizer files, written on first use."""
    written = {}

    def directory(family):
        fixture = FAMILIES[family][0]
        if fixture is None:
            return registry.packaged_default_dir()
        if family not in written:
            written[family] = tmp_path_factory.mktemp(family)
            __import__(fixture).write_tokenizer(str(written[family]))
        return written[family]

    return directory


@pytest.fixture(scope="module")
def preprocessor(directories):
    """(family, seq_length) -> the family's preprocessor, as the run builds it."""

    def build(family, seq_length):
        if family in ("xlm-roberta", "deberta-v3"):
            pytest.importorskip("transformers")  # the export converts the model file with it
        _, model_type, lower_case = FAMILIES[family]
        record = families.BY_MODEL_TYPE[model_type]
        path = os.path.join(directories(family), record.tokenizer_files[0])
        return record.preprocessor(path, lower_case, seq_length)

    return build


def onnx_tokenizer(preprocessor, directory, long_texts="truncate", pair=False) -> packing.Tokenizer:
    """The copy's tokenizer as the export writes it and the runtime reads it."""
    long_texts = input_pipeline.LongTexts.of(long_texts)
    for name, data in tokenizer_files.files(preprocessor, long_texts, pair).items():
        (directory / name).write_bytes(data)
    return packing.Tokenizer.from_dir(str(directory))


def savedmodel_features(preprocessor, texts, pairs=None, long_texts="truncate") -> dict:
    """The SavedModel's `tokenize` (export.ServingModule._tokenize)."""
    features = input_pipeline.encode(
        preprocessor, tf.constant(texts), None if pairs is None else tf.constant(pairs), long_texts
    )
    return {name: features[name].numpy() for name in packing.FEATURES}


def assert_equal_features(ours: dict, theirs: dict, texts):
    assert {name: value.dtype for name, value in ours.items()} == {
        name: np.dtype(np.int32) for name in packing.FEATURES
    }
    for name in packing.FEATURES:
        differing = [texts[i] for i in np.flatnonzero((ours[name] != theirs[name]).any(axis=1))]
        assert differing == [], name
        assert ours[name].shape == theirs[name].shape


@pytest.mark.parametrize("family", FAMILIES)
def test_single_texts_give_the_savedmodels_features(family, preprocessor, tmp_path):
    """Accents, emoji, CJK, whitespace runs, empty, NUL, control characters, special tokens
    written in the text, an over-long word and text: cut at --max-seq-length."""
    built = preprocessor(family, 16)
    ours = onnx_tokenizer(built, tmp_path).features(HARD)
    assert_equal_features(ours, savedmodel_features(built, HARD), HARD)


@pytest.mark.parametrize("family", FAMILIES)
def test_pairs_give_the_savedmodels_features(family, preprocessor, tmp_path):
    """The family's pair layout (separator, token types) and longest-first cut."""
    built, pairs = preprocessor(family, 15), HARD[::-1]
    ours = onnx_tokenizer(built, tmp_path, pair=True).features(HARD, pairs)
    assert_equal_features(ours, savedmodel_features(built, HARD, pairs), HARD)


def test_a_pair_cut_to_an_odd_budget_gives_the_longer_text_the_odd_token(preprocessor, tmp_path):
    built = preprocessor("bert", 16)  # 13 tokens besides [CLS] [SEP] [SEP]
    texts, pairs = ["one two three four five six seven eight"], ["a b c d e f g h i j"]
    ours = onnx_tokenizer(built, tmp_path, pair=True).features(texts, pairs)
    assert ours["input_type_ids"][0].tolist() == [0] * 8 + [1] * 8
    assert_equal_features(ours, savedmodel_features(built, texts, pairs), texts)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_head_tail_keeps_each_texts_head_and_tail(family, preprocessor, tmp_path):
    built = preprocessor(family, 12)
    ours = onnx_tokenizer(built, tmp_path, "head-tail").features(HARD)
    assert_equal_features(ours, savedmodel_features(built, HARD, long_texts="head-tail"), HARD)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_head_tail_pairs_keep_the_head_and_tail_of_their_shares(family, preprocessor, tmp_path):
    built, pairs = preprocessor(family, 13), HARD[::-1]
    ours = onnx_tokenizer(built, tmp_path, "head-tail", pair=True).features(HARD, pairs)
    assert_equal_features(ours, savedmodel_features(built, HARD, pairs, "head-tail"), HARD)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_windows_lie_side_by_side_with_zeros_after_a_texts_last(family, preprocessor, tmp_path):
    """RoBERTa pads a window with <pad> (id 1); the windows after a text's last are all 0."""
    built = preprocessor(family, 10)
    long_texts = input_pipeline.LongTexts("windows", window_overlap=3, max_windows=4)
    ours = onnx_tokenizer(built, tmp_path, long_texts).features(HARD)
    assert ours["input_word_ids"].shape == (len(HARD), 40)
    assert_equal_features(ours, savedmodel_features(built, HARD, long_texts=long_texts), HARD)


def test_the_tokenizer_json_adds_no_special_tokens(preprocessor, tmp_path):
    """transformers' conversion carries a post-processor; packing.json adds the special tokens."""
    import tokenizers

    onnx_tokenizer(preprocessor("xlm-roberta", 16), tmp_path)
    tokenizer = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tokenizer.encode("the movie").ids == tokenizer.encode("the movie", add_special_tokens=False).ids


def test_the_features_are_the_models_input_keys():
    from trainer.modeling.encoders.layers import INPUT_KEYS

    assert packing.FEATURES == tuple(INPUT_KEYS)


READ_WITHOUT_TENSORFLOW = textwrap.dedent("""
    import json, sys

    sys.path.insert(0, "tests/helpers")  # run from the repository's root
    from without_tensorflow import Blocked

    sys.meta_path.insert(0, Blocked())
    from trainer.serving.onnx import packing
    features = packing.Tokenizer.from_dir(sys.argv[1]).features(json.loads(sys.argv[2]))
    assert "tensorflow" not in sys.modules
    print(json.dumps({name: value.tolist() for name, value in features.items()}))
""")


def test_the_runtime_side_reads_a_copy_where_tensorflow_cannot_be_imported(preprocessor, tmp_path):
    built = preprocessor("bert", 16)
    onnx_tokenizer(built, tmp_path)
    run = subprocess.run(
        [sys.executable, "-c", READ_WITHOUT_TENSORFLOW, str(tmp_path), json.dumps(HARD)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    ours = {name: np.array(value, np.int32) for name, value in json.loads(run.stdout).items()}
    assert_equal_features(ours, savedmodel_features(built, HARD), HARD)


def test_a_copy_without_packing_json_is_one_error_naming_it(preprocessor, tmp_path):
    onnx_tokenizer(preprocessor("bert", 16), tmp_path)
    (tmp_path / "packing.json").unlink()
    with pytest.raises(UserError, match=r"packing\.json: missing"):
        packing.Tokenizer.from_dir(str(tmp_path))


def test_a_packing_json_of_another_format_is_one_error_naming_it(preprocessor, tmp_path):
    onnx_tokenizer(preprocessor("bert", 16), tmp_path)
    settings = json.loads((tmp_path / "packing.json").read_text())
    (tmp_path / "packing.json").write_text(json.dumps({**settings, "format": 99}))
    with pytest.raises(UserError, match=r"packing\.json: format 99, not 1"):
        packing.Tokenizer.from_dir(str(tmp_path))


def test_a_preprocessor_without_a_tokenizer_json_is_one_error():
    """A TF-Hub preprocessor (--encoder-backend hub) runs its publisher's graph."""

    class HubPreprocessor:
        pass

    with pytest.raises(UserError, match="no tokenizer.json for a HubPreprocessor"):
        tokenizer_files.files(HubPreprocessor(), input_pipeline.LongTexts(), pair=False)


def test_sentencepiece_without_transformers_is_one_error_naming_what_to_install(preprocessor, monkeypatch):
    built = preprocessor("deberta-v3", 16)
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(UserError, match=r"needs the transformers package.*pip install 'transformers"):
        tokenizer_files.files(built, input_pipeline.LongTexts(), pair=False)


def test_sentencepiece_with_a_transformers_before_5_25_is_one_error_naming_what_to_install(preprocessor, monkeypatch):
    """Before 5.25.0 transformers converted a DeBERTa-v3 model file with NFC, not its own map:
    a tokenizer.json unequal to the SavedModel's tokenizer on "ﬁ" or a no-break space."""
    import transformers

    built = preprocessor("deberta-v3", 16)
    monkeypatch.setattr(transformers, "__version__", "5.24.0")
    with pytest.raises(
        UserError, match=r"from transformers 5\.25\.0; this Python has 5\.24\.0: pip install 'transformers>=5\.25,<6'"
    ):
        tokenizer_files.files(built, input_pipeline.LongTexts(), pair=False)
