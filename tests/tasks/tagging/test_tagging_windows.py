"""A tagger reads texts of any length (issue #64): its export cuts a text's pieces into
overlapping windows (trainer/tasks/tagging/word_windows.py), tags each word in the window
where it has the most context, and reads entities over the whole text, in the SavedModel, its
int8 copy, trainer.predict and trainer.serve alike; and it returns every word with its offsets.

The tiny encoder's vocabulary words are one piece each, so a window of SEQ tokens holds exactly
SEQ - 2 words, and serving a window's words alone gives the tagger the same row.
"""

import json
import random

import numpy as np
import pytest
from test_task import run_in_process

SEQ = 12  # windows of 10 pieces, sharing 5
NAMES = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
WORDS = "i love hate this movie it is was not good bad great awful fine ok the so very meh a".split()


def reference_window(first: int, pieces: int, budget: int, overlap: int):
    """(window, offset) of the word whose first piece is `first` among a text's `pieces`, by
    the rule as written (word_windows' docstring): of the windows holding it, the one where
    the fewer of its pieces before and after it in the window is largest (a side reaching the
    text's own start or end unlimited), the first on a tie."""
    stride = budget - overlap
    count = 1 + max(0, -(-(pieces - budget) // stride))
    best = None
    for k in range(count):
        start = k * stride
        if not start <= first < start + budget:
            continue
        before = first - start if k > 0 else float("inf")
        after = start + budget - 1 - first if k < count - 1 else float("inf")
        if best is None or min(before, after) > best[0]:
            best = (min(before, after), k)
    return best[1], first - best[1] * stride


def test_each_word_is_read_in_the_window_where_it_has_the_most_context():
    import tensorflow as tf

    from trainer.tasks.tagging import word_windows

    # 7 pieces, windows of 4 sharing 2: [0, 4), [2, 6), [4, 7).
    windows, offsets = word_windows.reading_windows(
        tf.ragged.constant([list(range(7))], dtype=tf.int64), tf.constant([3], tf.int64), 4, 2
    )
    assert windows.to_list() == [[0, 0, 0, 1, 1, 2, 2]]
    assert offsets.to_list() == [[0, 1, 2, 1, 2, 1, 2]]


def test_the_graphs_windows_equal_the_rule_as_written_for_random_texts():
    import tensorflow as tf

    from trainer.tasks.tagging import word_windows

    rng = random.Random(7)
    for _ in range(40):
        budget = rng.randint(2, 12)
        overlap = rng.randint(0, budget - 1)
        texts = [sorted(rng.sample(range(n), rng.randint(1, n))) for n in (rng.randint(1, 60) for _ in range(4))]
        pieces = [text[-1] + 1 for text in texts]
        counts = [1 + max(0, -(-(n - budget) // (budget - overlap))) for n in pieces]
        windows, offsets = word_windows.reading_windows(
            tf.ragged.constant(texts, dtype=tf.int64), tf.constant(counts, tf.int64), budget, overlap
        )
        expected = [[reference_window(p, n, budget, overlap) for p in text] for text, n in zip(texts, pieces)]
        assert [list(zip(*row)) for row in zip(windows.to_list(), offsets.to_list())] == expected, (budget, overlap)


# --- the export ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def encoder(tiny_encoder_dir, tmp_path_factory):
    from trainer.modeling.encoders import load_encoder

    return load_encoder(tiny_encoder_dir, seq_length=SEQ, cache_dir=str(tmp_path_factory.mktemp("cache")))


def tagger(encoder, bias=None):
    """A tiny tagger whose tags depend on each token's context (a random head), or, given
    `bias`, whose logits are `bias` for every token (a zero kernel)."""
    from trainer.modeling import heads

    model = heads.build_tagger(encoder.network, len(NAMES), 0.0, SEQ)
    layer = model.get_layer("logits")
    rng = np.random.default_rng(3)
    layer.kernel.assign(
        np.zeros(layer.kernel.shape) if bias is not None else rng.standard_normal(layer.kernel.shape) * 2.0
    )
    layer.bias.assign(np.zeros(len(NAMES)) if bias is None else bias)
    return model


@pytest.fixture(scope="module")
def module(encoder):
    from trainer.tasks.tagging import export as tagger_export

    return tagger_export.TaggingModule(encoder.preprocessor, tagger(encoder), NAMES, SEQ)


# Every token's logits favour B-PER: every word is a person, the last one too.
EVERY_WORD_A_PERSON = [0.0, 5.0, 0.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def persons(encoder):
    """A tagger's export module that tags every word B-PER."""
    from trainer.tasks.tagging import export as tagger_export

    return tagger_export.TaggingModule(encoder.preprocessor, tagger(encoder, EVERY_WORD_A_PERSON), NAMES, SEQ)


@pytest.fixture(scope="module")
def persons_dir(persons, tmp_path_factory):
    """`persons` exported, as trainer.task writes a model dir."""
    from trainer.serving import export

    path = tmp_path_factory.mktemp("persons") / "model"
    export.export(persons, str(path))
    return path


def text_of(count, seed=0):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(count))


def served(module, *texts):
    import tensorflow as tf

    return {name: value.numpy() for name, value in module.serve(tf.constant(list(texts))).items()}


def words_of(outputs, row=0):
    return outputs["word_probabilities"][row][: outputs["word_count"][row]]


@pytest.mark.parametrize("count", [23, 700])  # 4 windows; 139, more than one call's 128
def test_each_word_of_a_long_text_is_tagged_as_its_best_window_alone_tags_it(module, count):
    text = text_of(count)
    words = text.split()
    whole = served(module, text)
    assert whole["word_count"][0] == count and whole["untagged_count"][0] == 0
    for index in (0, 7, 8, 12, count // 2, count - 3, count - 1):
        window, offset = reference_window(index, count, SEQ - 2, (SEQ - 2) // 2)
        first = window * (SEQ - 2 - (SEQ - 2) // 2)
        alone = served(module, " ".join(words[first : first + SEQ - 2]))
        np.testing.assert_allclose(words_of(whole)[index], words_of(alone)[offset], atol=1e-6)


def test_a_short_texts_answer_is_its_own_beside_a_long_one(module):
    short = "i love this movie"
    alone, beside = served(module, short), served(module, short, text_of(40))
    np.testing.assert_allclose(words_of(alone), words_of(beside), atol=1e-6)  # padded wider
    assert beside["word_tags"].shape[1] == 40  # the batch's outputs widen to its most words


@pytest.mark.slow  # a second traced module, exported and run (CI's slow line)
def test_a_long_texts_last_entity_is_found_at_its_offsets(persons):
    """Issue #64: a 155-word text came back with 63 tags, its last entity never looked at."""
    text = text_of(154) + " Zoë"
    out = served(persons, text)
    count = out["entity_count"][0]
    assert count == 155 and out["word_count"][0] == 155
    last = (
        out["entity_text"][0][count - 1].decode(),
        out["entity_start"][0][count - 1],
        out["entity_end"][0][count - 1],
    )
    assert last == ("Zoë", len(text) - 3, len(text))


def test_a_nul_character_ends_no_text(module):
    """Issue #64: the words after a NUL were dropped; it separates words as a space does."""
    text = "good\x00movie \x00 bad\x01awful"
    out = served(module, text)
    starts, ends = out["word_start"][0][: out["word_count"][0]], out["word_end"][0]
    assert [text[a:b] for a, b in zip(starts, ends)] == ["good", "movie", "bad", "awful"]


def test_a_word_without_pieces_is_returned_untagged_at_its_offsets(module):
    text = "good \u200d movie"
    out = served(module, text)
    assert [w.decode() for w in out["word_text"][0][: out["word_count"][0]]] == ["good", "movie"]
    assert out["untagged_count"].tolist() == [1]
    assert (out["untagged_text"][0][0].decode(), out["untagged_start"][0][0], out["untagged_end"][0][0]) == (
        "\u200d",
        5,
        6,
    )


# --- predict and serve -----------------------------------------------------------------------------

LONG = text_of(154) + " Zoë"
TEXTS = [LONG, "good \u200d movie", "a\x00b"]


@pytest.mark.slow  # a second traced module, exported and run (CI's slow line)
def test_predict_writes_every_word_with_its_offsets_and_tag_in_one_csv_column(persons_dir, tmp_path):
    import pandas as pd

    source, output = tmp_path / "in.jsonl", tmp_path / "out.csv"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    result = run_in_process("--model-dir", persons_dir, "--input", source, "--output", output, module="trainer.predict")
    assert result.returncode == 0, result.stderr
    rows = pd.read_csv(output, keep_default_na=False)
    assert list(rows.columns) == ["text", "entities", "words", "tags", "note"]
    words = [json.loads(cell) for cell in rows["words"]]
    for text, row in zip(TEXTS, words):
        assert all(text[w["start"] : w["end"]] == w["text"] for w in row)
    assert len(words[0]) == 155 and words[0][-1] == {
        "text": "Zoë",
        "start": len(LONG) - 3,
        "end": len(LONG),
        "tag": "B-PER",
    }
    assert words[1] == [
        {"text": "good", "start": 0, "end": 4, "tag": "B-PER"},
        {"text": "\u200d", "start": 5, "end": 6, "tag": None},
        {"text": "movie", "start": 7, "end": 12, "tag": "B-PER"},
    ]
    assert [w["text"] for w in words[2]] == ["a", "b"]
    assert [json.loads(cell) for cell in rows["tags"]] == [[w["tag"] for w in row] for row in words]
    assert json.loads(rows["entities"][0])[-1]["text"] == "Zoë"


@pytest.mark.slow  # a second traced module, exported and run (CI's slow line)
def test_the_servers_answers_hold_the_same_words_and_entities(persons_dir):
    """trainer.serve's batch function (predict_instances), on the export as loaded."""
    from trainer.serving import export, protocol

    answers, _ = protocol.predict_instances(export.load(str(persons_dir)), TEXTS, 8)
    assert [sorted(answer) for answer in answers] == [["entities", "tags", "words"]] * 3
    assert len(answers[0]["words"]) == len(answers[0]["tags"]) == len(answers[0]["entities"]) == 155
    assert answers[1]["tags"] == ["B-PER", None, "B-PER"]


@pytest.mark.slow  # a LiteRT conversion, as tests/serving/test_precisions.py's
def test_the_int8_copy_reads_a_long_text_in_the_same_windows(encoder, persons_dir):
    from trainer.serving import export, tflite

    model = tflite.int8_module(
        export.load_module(str(persons_dir)), tflite.convert(tagger(encoder, EVERY_WORD_A_PERSON))
    )
    float32 = export.load(str(persons_dir))
    texts = np.array(TEXTS, dtype=object)
    ours = {k: v.numpy() for k, v in model.signatures[export.SIGNATURE](text=texts).items()}
    theirs = {k: v.numpy() for k, v in float32(text=texts).items()}
    for name in ("entity_count", "entity_start", "entity_end", "word_count", "word_tags", "untagged_count"):
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    assert ours["word_count"][0] == 155
