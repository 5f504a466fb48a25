"""--long-texts windows: a text is read whole, in overlapping windows of --max-seq-length, each
encoded on its own and pooled into one vector, the same at training, in the export, in
trainer.predict and in the server.

The tests that train (a windowed classifier, a run end to end) are in the slow tier, which CI's
2.21 slow line runs (.ci/run): the default suite keeps within its 10 minutes."""

import csv
import logging

import numpy as np
import pytest
from test_long_texts import LABELS, LIMIT_TOKENS, late_word_rows

OVERLAP, MAX_WINDOWS = 4, 4


def ragged(rows):
    import tensorflow as tf

    return tf.ragged.constant(rows, dtype=tf.int64)


def test_windows_cover_a_text_each_sharing_the_overlap_with_the_one_before():
    from trainer.modeling.encoders.preprocessing import split_into_windows

    windows, counts = split_into_windows(ragged([list(range(12))]), budget=6, overlap=2, max_windows=4)
    assert counts.numpy().tolist() == [3]
    assert windows.to_list() == [[0, 1, 2, 3, 4, 5], [4, 5, 6, 7, 8, 9], [8, 9, 10, 11]]


def test_a_short_text_and_an_empty_one_are_one_window_each():
    from trainer.modeling.encoders.preprocessing import split_into_windows

    windows, counts = split_into_windows(ragged([[7, 8], []]), budget=6, overlap=2, max_windows=4)
    assert counts.numpy().tolist() == [1, 1]
    assert windows.to_list() == [[7, 8], []]


def test_a_text_past_max_windows_keeps_its_first_windows():
    from trainer.modeling.encoders.preprocessing import split_into_windows

    windows, counts = split_into_windows(ragged([list(range(100))]), budget=6, overlap=2, max_windows=2)
    assert counts.numpy().tolist() == [2]
    assert windows.to_list() == [[0, 1, 2, 3, 4, 5], [4, 5, 6, 7, 8, 9]]


@pytest.fixture(scope="module")
def encoder(tiny_encoder_dir, tmp_path_factory):
    from trainer.modeling.encoders import load_encoder

    return load_encoder(tiny_encoder_dir, seq_length=LIMIT_TOKENS, cache_dir=str(tmp_path_factory.mktemp("cache")))


def windows_flags():
    from trainer.data.input_pipeline import LongTexts

    return LongTexts("windows", OVERLAP, MAX_WINDOWS)


def test_training_rows_padded_to_whole_windows_are_the_exports_features(encoder):
    """The token cache keeps a row's windows back to back; padded to whole windows (as a
    batch is) they are exactly what the export's graph feeds the model."""
    import tensorflow as tf

    from trainer.data import input_pipeline

    texts = tf.constant([t for t, _ in late_word_rows(6, seed=7, words=(2, 40))])
    served = input_pipeline.encode(encoder.preprocessor, texts, long_texts=windows_flags())
    word_ids, _, lengths, _ = input_pipeline.pack_tokens(encoder.preprocessor, texts, long_texts=windows_flags())
    rows = (
        tf.RaggedTensor.from_row_lengths(word_ids, lengths)
        .to_tensor(0, shape=[None, MAX_WINDOWS * LIMIT_TOKENS])
        .numpy()
    )
    assert rows.tolist() == served["input_word_ids"].numpy().tolist()
    assert lengths.numpy().max() > 2 * LIMIT_TOKENS  # some rows really span several windows


@pytest.mark.parametrize("pooling", ["mean", "max", "attention"])
def test_empty_windows_padding_a_shorter_text_change_nothing(pooling):
    import tensorflow as tf

    from trainer.modeling.windows import WindowPooling

    layer = WindowPooling(pooling, seq_length=2)
    vectors = tf.constant([[1.0, -2.0], [5.0, 5.0], [9.0, 9.0]])  # one text, 3 windows
    mask = tf.constant([[1, 1, 0, 0, 0, 0]])  # only the first window has tokens
    assert layer(vectors, mask).numpy().tolist() == [[1.0, -2.0]]


def test_mean_and_max_pool_the_real_windows():
    import tensorflow as tf

    from trainer.modeling.windows import WindowPooling

    vectors = tf.constant([[1.0, -2.0], [3.0, 4.0], [9.0, 9.0]])
    mask = tf.constant([[1, 1, 1, 0, 0, 0]])  # two real windows, then an empty one
    assert WindowPooling("mean", 2)(vectors, mask).numpy().tolist() == [[2.0, 1.0]]
    assert WindowPooling("max", 2)(vectors, mask).numpy().tolist() == [[3.0, 4.0]]


@pytest.mark.parametrize("pooling", ["mean", "max", "attention"])
def test_a_text_scores_alike_however_wide_its_batch(encoder, pooling):
    """A text batched with longer ones is padded with empty windows: its logits stay."""
    import tensorflow as tf

    from trainer.data import input_pipeline
    from trainer.modeling import heads

    classifier = heads.build_classifier(encoder.network, 2, "mean", 0.0, windows=(LIMIT_TOKENS, pooling))
    features = input_pipeline.encode(
        encoder.preprocessor, tf.constant(["so good", "a b c d e f g h i j k l m n o"]), long_texts=windows_flags()
    )
    narrow = {k: v[:1, :LIMIT_TOKENS] for k, v in features.items()}
    wide = {k: v[:1] for k, v in features.items()}
    np.testing.assert_allclose(classifier(narrow).numpy(), classifier(wide).numpy(), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def windowed(encoder, tmp_path_factory):
    """{mode: model dir}: one classifier trained on windows of late_word_rows (the deciding
    word last, past the first window), exported with --long-texts windows and, the same
    weights, truncate; "built": its preprocessor and classifier."""
    import tensorflow as tf
    import tf_keras

    from trainer.data import input_pipeline
    from trainer.modeling import heads
    from trainer.serving import export

    tf_keras.utils.set_random_seed(0)
    # Max over windows: the window holding the deciding word speaks for the text (averaged with
    # the filler windows, 10 epochs reached 75% of test rows here).
    classifier = heads.build_classifier(encoder.network, 2, "mean", 0.0, windows=(LIMIT_TOKENS, "max"))
    classifier.compile(tf_keras.optimizers.Adam(1e-2), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train = late_word_rows(128, seed=1)
    features = input_pipeline.encode(
        encoder.preprocessor, tf.constant([t for t, _ in train]), long_texts=windows_flags()
    )
    classifier.fit(
        features, np.asarray([LABELS.index(label) for _, label in train]), batch_size=32, epochs=10, verbose=0
    )  # 100% of test rows over seeds 0-2; 88% at 6 epochs
    root = tmp_path_factory.mktemp("windowed")
    out = {"built": (encoder.preprocessor, classifier)}
    for name, flags in (("windows", windows_flags()), ("truncate", "truncate")):
        out[name] = str(root / name)
        export.export(
            export.ServingModule(encoder.preprocessor, classifier, LABELS, LIMIT_TOKENS, long_texts=flags), out[name]
        )
    return out


@pytest.mark.slow
def test_the_export_reads_a_long_text_to_its_last_window(windowed):
    from test_long_texts import accuracy

    rows = late_word_rows(40, seed=2)
    assert accuracy(windowed["windows"], rows) >= 0.95
    assert accuracy(windowed["truncate"], rows) <= 0.7  # the same weights, the first window only


@pytest.mark.slow
def test_the_export_tells_its_window_flags(windowed):
    from trainer.serving import export

    assert export.saved_long_texts(export.load_module(windowed["windows"])) == windows_flags()


def in_process_labels(windowed, texts):
    import tensorflow as tf

    from trainer.data import input_pipeline

    preprocessor, classifier = windowed["built"]
    features = input_pipeline.encode(preprocessor, tf.constant(texts), long_texts=windows_flags())
    return [LABELS[i] for i in np.argmax(classifier(features).numpy(), axis=1)]


def long_rows():
    """5,000-word texts (past --max-windows) and short ones, both labels."""
    return late_word_rows(4, seed=4, words=(5000, 5000)) + late_word_rows(4, seed=5, words=(18, 30))


@pytest.mark.slow
def test_predict_labels_5000_word_texts_as_the_model_in_process(windowed, tmp_path):
    from test_predict import run_cli

    texts = [t for t, _ in long_rows()]
    path = tmp_path / "long.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text",), *[(t,) for t in texts]])
    result = run_cli(
        "trainer.predict", "--model-dir", windowed["windows"], "--input", path, "--output", tmp_path / "out.csv"
    )
    assert result.returncode == 0, result.stderr
    predicted = [r["predicted_label"] for r in csv.DictReader(open(tmp_path / "out.csv", encoding="utf-8"))]
    assert predicted == in_process_labels(windowed, texts)
    assert "4 of 8 texts filled --max-windows 4 windows: an end past them was not read" in result.stdout


@pytest.mark.slow
def test_the_server_labels_5000_word_texts_as_the_model_in_process(windowed, tmp_path):
    from test_server import HEALTH, PREDICT, Server, environ, free_port

    texts = [t for t, _ in long_rows()]
    port = free_port()
    env = {
        **environ(),
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": HEALTH,
        "AIP_PREDICT_ROUTE": PREDICT,
        "AIP_STORAGE_URI": windowed["windows"],
    }
    server = Server([], env, HEALTH, tmp_path / "server.log").wait_ready(port)
    try:
        import httpx

        answer = httpx.post(server.url(port, PREDICT), json={"instances": texts}, timeout=60)
    finally:
        server.stop()
    assert answer.status_code == 200, answer.text
    assert [p["label"] for p in answer.json()["predictions"]] == in_process_labels(windowed, texts)


def test_windows_with_a_pair_task_is_refused_naming_the_flag():
    from trainer.config import build_config
    from trainer.errors import UserError

    with pytest.raises(UserError, match="^--long-texts: windows read single texts"):
        build_config(["--long-texts", "windows", "--text-pair-column", "b"], {})


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--window-overlap", "100"], "^--window-overlap: must be in \\[0, 93\\]"),
        (["--window-overlap", "-1"], "^--window-overlap: must be in"),
        (["--max-windows", "0"], "^--max-windows: must be in \\[1, 64\\]"),
    ],
)
def test_window_flags_out_of_range_are_refused(flags, message):
    from trainer.config import build_config
    from trainer.errors import UserError

    with pytest.raises(UserError, match=message):
        build_config(["--long-texts", "windows", *flags], {})


@pytest.mark.parametrize(
    "flag, value", [("--window-overlap", "8"), ("--max-windows", "4"), ("--window-pooling", "max")]
)
def test_a_window_flag_without_windows_is_refused(flag, value):
    from trainer.config import build_config
    from trainer.errors import UserError

    with pytest.raises(UserError, match=f"^{flag}: applies to --long-texts windows only"):
        build_config([flag, value], {})


def test_the_overlap_defaults_to_a_quarter_of_the_limit():
    from trainer.config import build_config
    from trainer.data.input_pipeline import LongTexts

    config = build_config(["--long-texts", "windows", "--max-seq-length", "256"], {})
    assert LongTexts.from_config(config.data) == LongTexts("windows", 64, 8)


class Split:
    def __init__(self, full_lengths):
        self.full_lengths = np.asarray(full_lengths)


def test_windows_say_how_texts_are_read_and_which_lose_their_end(caplog):
    from trainer.data import long_texts
    from trainer.data.input_pipeline import LongTexts

    flags = LongTexts("windows", 32, 8)  # 126 tokens of text a window, stride 94: 2 + 126 + 7 * 94
    tokenized = {"train": Split([100, 786, 787, 5000]), "test": Split([10])}
    with caplog.at_level(logging.INFO, logger="trainer"):
        long_texts.log_cut({"train": 3, "test": 0}, {"train": 4, "test": 1}, 128, flags, tokenized)
    info, warning = caplog.records
    assert "read in windows of 128 overlapping by 32 (--long-texts windows)" in info.getMessage()
    assert info.levelno == logging.INFO
    assert warning.levelno == logging.WARNING
    assert "longer than 786 tokens lose their end past --max-windows 8 windows: train 2, test 0" in warning.getMessage()


def hyperparameters(mode, **flags):
    return {"max_seq_length": 128, "long_texts": mode, **flags}


def test_the_report_and_card_say_a_windows_model_reads_texts_whole():
    from trainer.reporting.html import long_texts_note

    note = long_texts_note(hyperparameters("windows", window_overlap=32, max_windows=8, window_pooling="attention"))
    assert (
        "longer than 128 tokens (--max-seq-length, the special ones included) are read whole, "
        "in windows of 128 tokens overlapping by 32, at most 8 per text" in note
    )
    assert "pooled by their attention (--long-texts windows)" in note
    assert "never sees the rest" in long_texts_note(hyperparameters("truncate"))


@pytest.mark.slow  # run by hand (.ci/run's BY_HAND, docs/testing.md), not in CI
def test_a_windows_run_trains_exports_and_says_so(tiny_encoder_dir, tmp_path):
    """trainer.task end to end: the run log, metrics.json and the card name the windows, and
    the int8 copy is skipped with its reason."""
    import json

    from conftest import TINY_TASK_FLAGS
    from test_task import run_cli

    data = tmp_path / "train.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label"), *late_word_rows(120, seed=1)])
    job = tmp_path / "job"
    result = run_cli(
        "--training-file",
        data,
        "--job-dir",
        job,
        "--encoder",
        tiny_encoder_dir,
        *TINY_TASK_FLAGS,
        "--max-seq-length",
        str(LIMIT_TOKENS),
        "--long-texts",
        "windows",
        "--window-overlap",
        "4",
        "--max-windows",
        "8",
        "--window-pooling",
        "max",
        "--epochs",
        "2",
        "--export-int8",
        "on",
    )
    assert result.returncode == 0, result.stderr
    assert "(--long-texts windows), pooled by the model: train 108 of 108" in result.stdout
    metrics = json.loads((job / "metrics.json").read_text())
    assert {
        k: metrics["hyperparameters"][k] for k in ("long_texts", "window_overlap", "max_windows", "window_pooling")
    } == {"long_texts": "windows", "window_overlap": 4, "max_windows": 8, "window_pooling": "max"}
    assert metrics["precisions"]["int8"]["why"].startswith("--long-texts windows: the int8 model")
    assert "windows (overlap 4, at most 8, max pooling)" in (job / "MODEL_CARD.md").read_text()
    # Issue #49, 3: the skip is in the log, and neither predict's hint nor export_quantized
    # leads to a traceback.
    assert "int8 model not written: --long-texts windows: the int8 model" in result.stdout
    predicted = run_cli(
        "--model-dir",
        job / "model",
        "--input",
        data,
        "--output",
        tmp_path / "o.csv",
        "--precision",
        "int8",
        module="trainer.predict",
    )
    assert predicted.returncode == 2 and predicted.stderr.splitlines() == [
        f"error: --precision int8: {job / 'model'} holds no int8 model (it holds float32); none "
        f"can be made: {metrics['precisions']['int8']['why']}"
    ]
    quantized = run_cli("--model-dir", job / "model", "--precision", "int8", module="trainer.export_quantized")
    assert quantized.returncode == 2 and quantized.stderr.splitlines() == [
        f"error: --precision int8: no such copy of {job / 'model'} can be made: {metrics['precisions']['int8']['why']}"
    ]
