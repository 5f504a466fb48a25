"""A tagger's ONNX copy reads texts without TensorFlow (trainer/tasks/tagging/onnx_copy.py): its
words, windows and per-word features equal the tagger SavedModel's `tokenize`
(tasks/tagging/export.py), and given the same logits its answers equal the SavedModel's `outputs`
(entities, words, tags, counts, padding), for every tokenizer family.

The families' tokenizers are tests/serving/onnx/test_onnx_tokenizer.py's; the network matters to neither
side's rules, so their logits are random (a seeded normal, wide enough to give every tag, runs
of I- and entities anywhere), and the tiny BERT tagger's own are fed to both once.
"""

import json
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest
import tensorflow as tf
from conftest import ROOT
from test_onnx_tokenizer import FAMILIES, HARD, directories, onnx_tokenizer, preprocessor  # noqa: F401

from trainer.errors import UserError
from trainer.tasks.tagging import onnx_copy as onnx_tagging

SEQ = 16  # windows of 14 pieces, sharing 7
NAMES = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
LONG = "Ann met Bob in Rome , then Carl in Paris and Dora in Oslo . " * 5
TEXTS = HARD + [LONG, "lone \u200d joiner \u200d", "Zoë\x00São\x00\x00Paulo\x01x", "a"]


def module_of(built, tagger=None):
    """A tagger's export module over a preprocessor; `tagger`: its network (a stand-in without
    weights where only `tokenize` and `outputs` are called)."""
    from trainer.tasks.tagging import export as tagger_export

    return tagger_export.TaggingModule(built, tagger or types.SimpleNamespace(variables=[]), NAMES, built.seq_length)


def onnx_copy(module, directory) -> onnx_tagging.Tagger:
    """The copy's tokenizer files and tagging.json as the export writes them, read back."""
    from trainer.data import input_pipeline

    onnx_tokenizer(module.preprocessor, directory, input_pipeline.LongTexts())
    (directory / onnx_tagging.TAGGING).write_bytes(
        onnx_tagging.tagging_json(module.preprocessor, NAMES, int(module.window_overlap.numpy()))
    )
    return onnx_tagging.Tagger.from_dir(str(directory))


def numpy_of(outputs: dict) -> dict:
    return {name: value.numpy() for name, value in outputs.items()}


def assert_equal_outputs(ours: dict, theirs: dict, tolerance: float = 1e-6):
    """Same names, dtypes and shapes; strings and integers equal, floats within `tolerance`
    (numpy's exp and sums are not Eigen's, to the last bit)."""
    assert sorted(ours) == sorted(theirs)
    for name, value in theirs.items():
        assert (ours[name].dtype, ours[name].shape) == (value.dtype, value.shape), name
        if value.dtype.kind == "f":
            np.testing.assert_allclose(ours[name], value, rtol=0, atol=tolerance, err_msg=name)
        else:
            np.testing.assert_array_equal(ours[name], value, err_msg=name)


def random_logits(features: dict, seed: int = 0) -> np.ndarray:
    rows, width = features["input_mask"].shape
    return np.random.default_rng(seed).normal(0, 3, [rows, width, len(NAMES)]).astype(np.float32)


def test_words_and_offsets_equal_tf_texts_on_every_code_point():
    """Each code point between two letters: a word's character, a separator, or a word of its
    own, as RE2's Unicode classes read it (including NUL, which TF-Text reads as U+0001)."""
    from trainer.tasks.tagging.word_spans import split_words

    codes = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    texts = ["".join(f"a{chr(c)}b" for c in codes[i : i + 5000]) for i in range(0, len(codes), 5000)]
    _, starts, ends = split_words(tf.constant(texts))
    differing = [
        i
        for i, (text, s, e) in enumerate(zip(texts, starts.to_list(), ends.to_list()))
        if onnx_tagging.split_words(text) != list(zip(s, e))
    ]
    assert differing == []


def test_words_are_split_at_spaces_controls_and_each_punctuation_character():
    text = "Ann\x00met  Bob's\u00a0cat\x85(St. Zoë) 👍🏽\u200d!"
    assert [text[a:b] for a, b in onnx_tagging.split_words(text)] == [
        "Ann",
        "met",
        "Bob",
        "'",
        "s",
        "cat",
        "(",
        "St",
        ".",
        "Zoë",
        ")",
        "👍🏽\u200d",
        "!",
    ]
    assert onnx_tagging.split_words("") == onnx_tagging.split_words(" \t\x00 ") == []


# One family of each kind: WordPiece (lower-cased, accents stripped), byte-level BPE (each word
# read after a space), SentencePiece. test_onnx_tokenizer reads every family's pieces of texts.
KINDS = ("bert", "roberta", "xlm-roberta")


@pytest.fixture(scope="module")
def exported(preprocessor, tmp_path_factory):  # noqa: F811  the imported fixture
    """family -> its tagger's export module, the copy's folder and the copy read from it, and
    the SavedModel's `tokenize` of TEXTS (each module's tokenize traced once: about 10 s)."""
    made = {}

    def make(family):
        if family not in made:
            module = module_of(preprocessor(family, SEQ))
            directory = tmp_path_factory.mktemp(family)
            made[family] = types.SimpleNamespace(
                module=module,
                directory=directory,
                copy=onnx_copy(module, directory),
                features=numpy_of(module.tokenize(tf.constant(TEXTS))),
            )
        return made[family]

    return make


@pytest.mark.parametrize(  # BERT's by default; the others trace a tokenizer each (CI's slow line; RoBERTa's by hand)
    "family", [pytest.param(family, marks=[] if family == "bert" else [pytest.mark.slow]) for family in KINDS]
)
def test_the_windows_and_word_features_equal_the_savedmodels(family, exported):
    """Hard texts (accents, emoji, CJK, runs of spaces, NUL and control characters, empty, an
    over-long word) and texts of several windows, in the family's own pieces."""
    tagger = exported(family)
    assert tagger.features["input_mask"].shape[0] > len(TEXTS)  # some text has several windows
    assert_equal_outputs(tagger.copy.tokenize(TEXTS), tagger.features)


def test_the_answers_of_the_same_logits_equal_the_savedmodels(exported):
    """The answers depend on the words and windows alone, not on the family that made them:
    one family's suffice."""
    tagger = exported("bert")
    logits = random_logits(tagger.features)
    words = [tagger.features[name] for name in onnx_tagging.WORD_FEATURES]
    theirs = numpy_of(tagger.module.outputs(tf.constant(TEXTS), logits, *words))
    assert theirs["entity_count"].sum() > len(TEXTS) and theirs["untagged_count"].sum() > 0
    assert_equal_outputs(tagger.copy.outputs(TEXTS, logits, *words), theirs)


def test_an_entity_across_windows_reads_from_the_first_word_to_the_last(exported):
    """Every word I-PER: one entity, the whole text, although its words are read in several
    windows (an I- that continues nothing begins one: spans.entity_runs)."""
    tagger = exported("bert")
    features = numpy_of(tagger.module.tokenize(tf.constant([LONG])))
    logits = np.zeros([*features["input_mask"].shape, len(NAMES)], np.float32)
    logits[..., NAMES.index("I-PER")] = 5.0
    words = [features[name] for name in onnx_tagging.WORD_FEATURES]
    ours = tagger.copy.outputs([LONG], logits, *words)
    assert len(features["input_mask"]) > 1
    assert (
        ours["entity_count"].tolist(),
        ours["entity_start"][0, 0],
        ours["entity_end"][0, 0],
        ours["entity_text"][0, 0],
    ) == ([1], 0, len(LONG) - 1, LONG.strip().encode())
    assert_equal_outputs(ours, numpy_of(tagger.module.outputs(tf.constant([LONG]), logits, *words)))


@pytest.mark.slow  # about 25 s; the random logits' tests check the same rules
def test_the_tiny_taggers_answers_equal_its_savedmodels(tiny_encoder_dir, tmp_path):
    """The tiny BERT tagger's own logits, computed on the windows cut to their longest row as
    the SavedModel's `serve` runs them, fed back through the copy's rules. The network runs
    eagerly here and in a graph there: its logits differ in the sixth digit."""
    from test_tagging_windows import SEQ as TAGGER_SEQ
    from test_tagging_windows import tagger

    from trainer.modeling.encoders import load_encoder

    encoder = load_encoder(tiny_encoder_dir, seq_length=TAGGER_SEQ, cache_dir=str(tmp_path / "cache"))
    network = tagger(encoder)
    module = module_of(encoder.preprocessor, network)
    (tmp_path / "copy").mkdir()
    copy = onnx_copy(module, tmp_path / "copy")
    ours = copy.serve(TEXTS, lambda features: network(features, training=False).numpy())
    assert_equal_outputs(ours, numpy_of(module.serve(tf.constant(TEXTS))), tolerance=1e-5)


READ_WITHOUT_TENSORFLOW = textwrap.dedent("""
    import json, sys

    sys.path.insert(0, "tests/helpers")  # run from the repository's root
    from without_tensorflow import Blocked

    sys.meta_path.insert(0, Blocked())
    from trainer.tasks.tagging import onnx_copy as tagger_copy
    features = tagger_copy.Tagger.from_dir(sys.argv[1]).tokenize(json.loads(sys.argv[2]))
    assert not [name for name in sys.modules if name.startswith(("tensorflow", "tf_keras"))]
    print(json.dumps({name: value.tolist() for name, value in features.items()}))
""")


def test_the_copy_reads_texts_where_tensorflow_cannot_be_imported(exported):
    tagger = exported("bert")
    run = subprocess.run(
        [sys.executable, "-c", READ_WITHOUT_TENSORFLOW, str(tagger.directory), json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    ours = {name: np.array(value, tagger.features[name].dtype) for name, value in json.loads(run.stdout).items()}
    assert_equal_outputs(ours, tagger.features)


@pytest.mark.slow  # three families' taggers converted (CI's slow line)
def test_tagging_json_holds_the_tags_the_overlap_and_the_word_prefix(exported):
    """Byte-level BPE reads each word after a space (preprocessing.SubwordPreprocessor)."""
    settings = json.loads((exported("roberta").directory / onnx_tagging.TAGGING).read_text())
    assert settings == {"format": 1, "tag_names": NAMES, "window_overlap": 7, "word_prefix": " "}
    assert [exported(family).copy.word_prefix for family in ("bert", "xlm-roberta")] == ["", ""]


@pytest.fixture
def copy_dir(exported, tmp_path):
    """A copy of the BERT tagger's copy's folder, to spoil."""
    for path in exported("bert").directory.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    return tmp_path


def test_a_copy_without_tagging_json_is_one_error_naming_it(copy_dir):
    (copy_dir / onnx_tagging.TAGGING).unlink()
    with pytest.raises(UserError, match=r"tagging\.json: missing"):
        onnx_tagging.Tagger.from_dir(str(copy_dir))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"format": 2}, r"tagging\.json: format 2, not 1"),
        ({"tag_names": ["O", "B-PER"]}, r"tagging\.json: tag_names is not a list of O and a B- and I-"),
        ({"window_overlap": 14}, r"tagging\.json: window_overlap 14 is not a count of pieces below"),
    ],
)
def test_a_tagging_json_the_export_did_not_write_is_one_error_naming_it(change, message, copy_dir):
    settings = json.loads((copy_dir / onnx_tagging.TAGGING).read_text())
    (copy_dir / onnx_tagging.TAGGING).write_text(json.dumps({**settings, **change}))
    with pytest.raises(UserError, match=message):
        onnx_tagging.Tagger.from_dir(str(copy_dir))


def test_the_word_features_are_the_exports():
    from trainer.tasks.tagging import export as tagger_export

    assert onnx_tagging.WORD_FEATURES == tagger_export.WORD_FEATURES
