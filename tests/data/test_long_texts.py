"""Texts over --max-seq-length: the cut is counted, said, and the metrics are broken down by
length; --long-texts head-tail keeps a long text's last words at training, in the export, in
its checked copies and in trainer.predict."""

import csv
import logging
import random

import numpy as np
import pytest

from trainer.data import long_texts
from trainer.tasks.classification import ClassificationTask

LIMIT = 10


class Split:
    def __init__(self, full_lengths):
        self.full_lengths = np.asarray(full_lengths)


def test_only_texts_longer_than_the_limit_count_as_cut():
    assert long_texts.cut_counts({"train": Split([9, 10, 11, 50]), "test": Split([3])}, LIMIT) == {
        "train": 2,
        "test": 0,
    }


def test_a_cut_is_one_warning_naming_each_splits_share(caplog):
    with caplog.at_level(logging.WARNING, logger="trainer"):
        long_texts.log_cut({"train": 88, "test": 0}, {"train": 100, "test": 20}, 128)
    (record,) = caplog.records
    assert "cut to 128, their first tokens (--long-texts truncate)" in record.getMessage()
    assert "train 88 of 100 (88%), test 0 of 20 (0%)" in record.getMessage()


def test_a_head_tail_cut_says_what_it_kept(caplog):
    with caplog.at_level(logging.WARNING, logger="trainer"):
        long_texts.log_cut({"train": 1}, {"train": 2}, 128, "head-tail")
    assert "their first and last tokens (--long-texts head-tail)" in caplog.records[0].getMessage()


def test_a_pairs_cut_says_the_longer_text_goes_first(caplog):
    with caplog.at_level(logging.WARNING, logger="trainer"):
        long_texts.log_cut({"train": 1}, {"train": 2}, 128, "head-tail", pairs=True)
    assert (
        caplog.records[0]
        .getMessage()
        .startswith(
            "pairs longer than --max-seq-length 128 tokens are cut to 128, the longer text of a pair "
            "first, each text keeping their first and last tokens (--long-texts head-tail)"
        )
    )


def test_windows_with_a_named_pair_column_are_refused_naming_the_flag():
    from trainer.config import build_config
    from trainer.errors import UserError

    with pytest.raises(
        UserError, match="^--long-texts: windows read single texts; use --long-texts head-tail or truncate for pairs"
    ):
        build_config(["--long-texts", "windows", "--text-pair-column", "b"], {})


def test_windows_with_a_detected_pair_are_refused_before_the_rows_are_read(tmp_path):
    """Issue #49, 2: a pair found by its column names (sentence1/sentence2) got as far as
    tokenizing, then failed with a raw traceback."""
    from conftest import write_csv

    from trainer.config import build_config
    from trainer.data import splits
    from trainer.errors import UserError

    path = write_csv(tmp_path / "pairs.csv", [("a b", "c d", "yes")] * 12, header=("sentence1", "sentence2", "label"))
    config = build_config(["--training-file", path, "--long-texts", "windows"], {})
    with pytest.raises(
        UserError,
        match=r"^--long-texts windows: .*pairs.csv holds pairs of texts "
        r"\('sentence1', 'sentence2'\)",
    ):
        splits.load_datasets(config)


def test_a_bi_encoder_reads_each_text_of_a_pair_in_windows_of_its_own(tmp_path):
    from conftest import write_csv

    from trainer.config import build_config
    from trainer.data import splits

    path = write_csv(tmp_path / "pairs.csv", [("a b", "c d")] * 12, header=("sentence1", "sentence2"))
    config = build_config(["--task", "embedding", "--training-file", path, "--long-texts", "windows"], {})
    assert splits.load_datasets(config).text_pair_column == "sentence2"


def test_nothing_cut_says_nothing(caplog):
    with caplog.at_level(logging.WARNING, logger="trainer"):
        long_texts.log_cut({"train": 0}, {"train": 100}, 128)
    assert not caplog.records


def test_each_length_bucket_scores_only_its_own_rows():
    full = np.array([5, 10, 11, 40, 41, 400])  # up to 1x: 2 rows, 1-4x: 2, over 4x: 2
    labels = np.array([0, 1, 0, 1, 0, 1])
    logits = np.array([[2, 0], [0, 2], [0, 2], [0, 2], [0, 2], [2, 0]], np.float64)  # rows 2, 4, 5 wrong
    out = long_texts.by_length(full, LIMIT, logits, labels, ClassificationTask(), ["a", "b"])
    assert [(b["tokens"], b["examples"]) for b in out.values()] == [("up to 10", 2), ("11-40", 2), ("over 40", 2)]
    assert [b["accuracy"] for b in out.values()] == pytest.approx([1.0, 0.5, 0.0])
    assert set(out["up_to_1x"]) == {"tokens", "examples", "loss", "accuracy", "macro_f1", "macro_recall"}


def test_an_empty_bucket_has_its_count_and_no_scores():
    out = long_texts.by_length(
        np.array([5, 6]), LIMIT, np.zeros((2, 2)), np.array([0, 1]), ClassificationTask(), ["a", "b"]
    )
    assert out["over_4x"] == {"tokens": "over 40", "examples": 0}


FILLER = ["i", "this", "movie", "it", "is", "was", "the", "so", "very", "a", "ok", "fine", "meh"]
LABELS = ["negative", "positive"]
LIMIT_TOKENS = 16


def late_word_rows(count: int, seed: int, words=(20, 30)):
    """(text, label): more filler words than 16 tokens hold, then the word that decides the
    label ("great" or "awful") last, where a cut at the limit never reaches."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        text = [rng.choice(FILLER) for _ in range(rng.randint(*words))]
        rows.append((" ".join(text + [("awful", "great")[i % 2]]), LABELS[i % 2]))
    return rows


@pytest.fixture(scope="module")
def late_word_exports(tiny_encoder_dir, tmp_path_factory):
    """{mode: model dir} of one classifier trained on head-tail features of late_word_rows,
    exported with --long-texts head-tail and (the same weights) with truncate; and under
    "built", its preprocessor and classifier."""
    import tensorflow as tf
    import tf_keras

    from trainer.data import input_pipeline
    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.serving import export

    tf_keras.utils.set_random_seed(0)
    encoder = load_encoder(tiny_encoder_dir, seq_length=LIMIT_TOKENS, cache_dir=str(tmp_path_factory.mktemp("cache")))
    classifier = heads.build_classifier(encoder.network, 2, "mean", 0.0)
    classifier.compile(tf_keras.optimizers.Adam(1e-2), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train = late_word_rows(128, seed=1)
    features = input_pipeline.encode(encoder.preprocessor, tf.constant([t for t, _ in train]), long_texts="head-tail")
    classifier.fit(
        features, np.asarray([LABELS.index(label) for _, label in train]), batch_size=32, epochs=4, verbose=0
    )
    root = tmp_path_factory.mktemp("late_word")
    out = {"built": (encoder.preprocessor, classifier)}
    for mode in ("head-tail", "truncate"):
        out[mode] = str(root / mode)
        export.export(
            export.ServingModule(encoder.preprocessor, classifier, LABELS, LIMIT_TOKENS, long_texts=mode), out[mode]
        )
    return out


def accuracy(model_dir, rows):
    import tensorflow as tf

    from trainer.serving import export

    outputs = export.load(model_dir)(text=tf.constant([t for t, _ in rows]))
    predicted = [label.decode() for label in outputs["label"].numpy()]
    return np.mean([p == label for p, (_, label) in zip(predicted, rows)])


def test_the_export_keeps_a_long_texts_last_words_inside_its_graph(late_word_exports):
    rows = late_word_rows(40, seed=2)
    assert accuracy(late_word_exports["head-tail"], rows) >= 0.95
    # The same weights behind a cut at the limit never see the deciding word.
    assert accuracy(late_word_exports["truncate"], rows) <= 0.7


def test_a_checked_copy_is_built_with_the_exports_long_texts(late_word_exports):
    import tensorflow as tf

    from trainer.serving import export, quantize

    reference = export.load_module(late_word_exports["head-tail"])
    copy = quantize.module_like(
        reference, *late_word_exports["built"], ClassificationTask(), LABELS, LIMIT_TOKENS, pair=False
    )
    assert copy.long_texts.numpy() == b"head-tail"
    text = tf.constant([late_word_rows(1, seed=3)[0][0]])
    assert (
        copy.tokenize.python_function(text)["input_word_ids"].numpy().tolist()
        == reference.tokenize(text)["input_word_ids"].numpy().tolist()
    )


@pytest.mark.slow  # CI's slow line (.ci/run)
def test_predict_labels_a_5000_word_text_by_its_last_words(late_word_exports, tmp_path):
    from test_predict import run_cli

    rows = late_word_rows(4, seed=4, words=(5000, 5000))
    path = tmp_path / "long.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text",), *[(text,) for text, _ in rows]])
    result = run_cli(
        "trainer.predict",
        "--model-dir",
        late_word_exports["head-tail"],
        "--input",
        path,
        "--output",
        tmp_path / "out.csv",
    )
    assert result.returncode == 0, result.stderr
    predicted = [row["predicted_label"] for row in csv.DictReader(open(tmp_path / "out.csv", encoding="utf-8"))]
    assert predicted == [label for _, label in rows]
    assert (
        "4 of 4 texts reached the model's --max-seq-length: a longer text was cut to its first "
        "and last tokens (--long-texts head-tail)" in result.stdout
    )


@pytest.mark.slow  # CI's slow line (.ci/run)
def test_the_server_labels_a_5000_word_text_as_predict_does(late_word_exports, tmp_path):
    from test_server import HEALTH, PREDICT, Server, environ, free_port

    rows = late_word_rows(4, seed=4, words=(5000, 5000))
    port = free_port()
    env = {
        **environ(),
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": HEALTH,
        "AIP_PREDICT_ROUTE": PREDICT,
        "AIP_STORAGE_URI": late_word_exports["head-tail"],
    }
    server = Server([], env, HEALTH, tmp_path / "server.log").wait_ready(port)
    try:
        import httpx

        answer = httpx.post(server.url(port, PREDICT), json={"instances": [t for t, _ in rows]}, timeout=60)
    finally:
        server.stop()
    assert answer.status_code == 200, answer.text
    assert [p["label"] for p in answer.json()["predictions"]] == [label for _, label in rows]
