"""Token attributions (trainer.explaining): integrated gradients on the word embeddings of an
exported model add up to its output's change, find the one word that decides a label, come
back as words whatever the tokenizer, and reach users through trainer.explain, report.html
and trainer.serve, with the same numbers everywhere.

The model is trained here, in this process, in a few seconds: a tiny BERT on texts of filler
words where one planted word ("great" or "awful") decides the label."""

import html
import json
import random
import re

import numpy as np
import pytest
from test_task import run_in_process

from trainer import task_registry
from trainer.explaining import words

FILLER = ["i", "this", "movie", "it", "is", "was", "the", "so", "very", "a", "ok", "fine", "meh"]
PLANTED = {"great": "positive", "awful": "negative"}
LABELS = ["negative", "neutral", "positive"]
CLASSIFICATION = task_registry.by_name("classification")


def planted_rows(count: int, seed: int):
    """(text, label): 3-8 filler words, and in two rows of three one planted word at a random
    place, which decides the label; the third row, without one, is neutral (so that a text
    of no words, the attributions' baseline, means nothing in particular)."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        text = [rng.choice(FILLER) for _ in range(rng.randint(3, 8))]
        word = ("great", "awful", None)[i % 3]
        if word:
            text.insert(rng.randint(0, len(text)), word)
        rows.append((" ".join(text), PLANTED.get(word, "neutral")))
    return rows


@pytest.fixture(scope="module")
def planted_model(tiny_encoder_dir, tmp_path_factory):
    """(model dir, the loaded export, validation rows) of the planted-word classifier."""
    import tensorflow as tf
    import tf_keras

    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.serving import export

    tf_keras.utils.set_random_seed(0)
    encoder = load_encoder(tiny_encoder_dir, seq_length=16, cache_dir=str(tmp_path_factory.mktemp("cache")))
    classifier = heads.build_classifier(encoder.network, 3, "mean", 0.0)
    classifier.compile(tf_keras.optimizers.Adam(1e-2), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train = planted_rows(256, seed=1)
    features = encoder.preprocessor(tf.constant([text for text, _ in train]))
    classifier.fit(
        features, np.asarray([LABELS.index(label) for _, label in train]), batch_size=32, epochs=6, verbose=0
    )
    model_dir = str(tmp_path_factory.mktemp("planted") / "model")
    export.export(export.ServingModule(encoder.preprocessor, classifier, LABELS, 16), model_dir)
    return model_dir, export.load_module(model_dir), planted_rows(45, seed=2)


@pytest.fixture(scope="module")
def explained(planted_model):
    from trainer.explaining import attribute

    _, model, rows = planted_model
    return attribute.explain_texts(model, [text for text, _ in rows])


def test_attributions_add_up_to_the_output_minus_the_baselines_for_95_percent_of_rows(explained):
    gaps = np.asarray([e.completeness_error for row in explained for e in row])
    assert len(gaps) == 45
    assert np.mean(gaps <= 0.05) >= 0.95, np.sort(gaps)[-5:]


def test_the_planted_word_ranks_first_in_95_percent_of_correctly_predicted_rows(planted_model, explained):
    _, _, rows = planted_model
    correct = [
        (text, row[0]) for (text, label), row in zip(rows, explained) if label != "neutral" and row[0].target == label
    ]
    assert len(correct) >= 27  # of 30 planted rows: the model learned the task
    first = [words.top_words(e.words, 1)[0].text for _, e in correct]
    assert np.mean([word in PLANTED for word in first]) >= 0.95


def test_long_explaining_logs_progress_lines_with_rows_and_an_eta(planted_model, caplog):
    from trainer.explaining import attribute

    _, model, rows = planted_model
    with caplog.at_level("INFO", logger="trainer"):
        attribute.explain_texts(model, [text for text, _ in rows[:4]], batch_size=2, log_every_seconds=0)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("explained (32 steps)")]
    assert lines and "4/4 rows (100%)" in lines[-1] and "rows/s" in lines[-1] and "ETA" in lines[-1]


def test_an_empty_text_gets_no_explanation(planted_model):
    from trainer.explaining import attribute

    _, model, _ = planted_model
    assert attribute.explain_texts(model, ["", "great movie"])[0] == []


def test_target_explains_the_asked_label_instead_of_the_predicted_one(planted_model):
    from trainer.explaining import attribute

    _, model, _ = planted_model
    ((explanation,),) = attribute.explain_texts(model, ["it was great"], target="negative")
    assert explanation.target == "negative" and explanation.output < 0.5
    assert words.top_words(explanation.words, 1)[0].weight < 0  # "great" pulls "negative" down


@pytest.mark.parametrize(
    "kind, tokens, expected",
    [
        (words.WORDPIECE, ["[CLS]", "play", "##ing", "now", "[SEP]"], ["playing", "now"]),
        (words.BYTE_PAIR, ["<s>", "play", "ing", "Ġnow", "Ġcaf", "Ã", "©", "</s>"], ["playing", "now", "café"]),
        (
            words.SENTENCEPIECE,
            ["<s>", "▁play", "ing", "▁", "now", "▁caf", "<0xC3>", "<0xA9>", "</s>"],
            ["playing", "now", "café"],
        ),
    ],
)
def test_word_pieces_merge_back_into_the_texts_words(kind, tokens, expected):
    texts, starts = words.piece_table(tokens, kind)
    content = [t not in ("[CLS]", "[SEP]", "<s>", "</s>") for t in tokens]
    merged = words.merge(texts, starts, content, np.arange(len(tokens), dtype=float))
    assert [w.text for w in merged] == expected
    assert sum(w.weight for w in merged) == sum(i for i, c in enumerate(content) if c)


def test_a_pairs_words_are_marked_with_the_text_they_come_from():
    tokens = ["<s>", "Ġgood", "</s>", "</s>", "Ġbad", "Ġday", "</s>"]
    texts, starts = words.piece_table(tokens, words.BYTE_PAIR)
    merged = words.merge(texts, starts, [t not in ("<s>", "</s>") for t in tokens], [0.0] * 7)
    assert [(w.text, w.segment) for w in merged] == [("good", 0), ("bad", 1), ("day", 1)]


def test_explain_writes_the_top_words_of_each_row_and_an_html_page(planted_model, tmp_path):
    model_dir, _, rows = planted_model
    rows = [row for row in rows if row[1] != "neutral"]
    source = tmp_path / "in.csv"
    texts = [text for text, _ in rows[:3]] + [rows[3][0].upper()]  # the page keeps its case
    source.write_text("text\n" + "".join(f"{text}\n" for text in texts) + '""\n')
    result = run_in_process(
        "--model-dir",
        model_dir,
        "--input",
        str(source),
        "--output",
        str(tmp_path / "out.jsonl"),
        "--top-k",
        "2",
        module="trainer.explain",
    )
    assert result.returncode == 0, result.stderr
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["text"] for r in written] == texts + [""]
    assert all(len(r["top_words"]) == 2 and r["top_words"][0]["word"] in PLANTED for r in written[:4])
    assert written[4]["top_words"] is None and written[4]["note"]
    page = (tmp_path / "out.html").read_text()
    assert page.count('<span class="w"') >= sum(len(text.split()) for text in texts)
    assert all(f">{word}</span>" in page for word in texts[3].split())
    assert f"the coloured texts to {tmp_path / 'out.html'}" in result.stdout


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--model-dir", "missing", "error: --model-dir: no exported model in missing"),
        ("--input", "missing.csv", "error: --input: file not found: missing.csv"),
        ("--output", "out.tsv", "error: --output: out.tsv: write .csv or .jsonl"),
        ("--target", "maybe", "error: --target: 'maybe' is not one of the model's labels"),
    ],
)
def test_bad_flags_are_one_error_line_and_exit_2(planted_model, tmp_path, monkeypatch, flag, value, message):
    model_dir, _, _ = planted_model
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text("text\ngreat movie\n")
    args = {"--model-dir": model_dir, "--input": "in.csv", "--output": "out.csv", flag: value}
    result = run_in_process(*[item for pair in args.items() for item in pair], module="trainer.explain")
    assert result.returncode == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize(
    "parameters, error",
    [
        ({"explain": 1}, '"parameters".explain: expected true or false, got a number'),
        ({"explain": True, "steps": 8}, '"parameters": unknown parameter(s) steps; this model takes only "explain"'),
    ],
)
def test_serve_refuses_an_explain_parameter_it_cannot_read(parameters, error):
    from trainer.serving import protocol

    with pytest.raises(protocol.RequestError, match=re.escape(error)):
        protocol.read_instances({"instances": ["great"], "parameters": parameters}, 8)


def test_the_report_colours_the_words_of_errors_and_of_a_sample_of_correct_rows(planted_model):
    from trainer.inference.split_predictions import SplitPredictions
    from trainer.reporting import explanations

    model_dir, model, rows = planted_model
    texts = np.asarray([text for text, _ in rows], dtype=object)
    labels = np.asarray([LABELS.index(label) for _, label in rows])
    labels[:2] = (labels[:2] + 1) % 3  # two rows the model gets wrong
    probabilities = np.eye(3)[[LABELS.index(label) for _, label in rows]] * 0.9 + 0.1 / 3
    predictions = {"validation": SplitPredictions(texts, labels, probabilities, np.log(probabilities))}
    section = explanations.report_section(model_dir, predictions, LABELS, CLASSIFICATION, 32, seed=0, count=20)
    outcomes = [entry["outcome"] for entry in section["entries"]]
    assert outcomes == ["error"] * 2 + ["correct"] * 10
    assert [entry["row"] for entry in section["entries"][:2]] == [0, 1]
    first = section["entries"][0]["text"]
    assert first.count('<span class="w"') == len(rows[0][0].split()) and "rgba(" in first


def test_report_explanations_0_leaves_the_section_out(planted_model):
    from trainer.inference.split_predictions import SplitPredictions
    from trainer.reporting import explanations

    model_dir, _, rows = planted_model
    texts = np.asarray([text for text, _ in rows], dtype=object)
    labels = np.asarray([LABELS.index(label) for _, label in rows])
    probabilities = np.eye(3)[labels] * 0.9 + 0.1 / 3
    predictions = {"validation": SplitPredictions(texts, labels, probabilities, np.log(probabilities))}
    assert explanations.report_section(model_dir, predictions, LABELS, CLASSIFICATION, 32, seed=0, count=0) is None


def test_the_reports_words_are_the_texts_own_with_their_case_and_punctuation():
    tokens = ["[CLS]", "the", "bank", "'", "s", "atm", "[SEP]"]  # uncased WordPiece's
    texts, starts = words.piece_table(tokens, words.WORDPIECE)
    merged = words.merge(texts, starts, [t not in ("[CLS]", "[SEP]") for t in tokens], [0, 1, 2, 3, 4, 5, 0])
    assert [w.text for w in merged] == ["the", "bank", "'", "s", "atm"]
    shown = words.in_texts(merged, ["The Bank's ATM"])
    assert [(w.text, w.weight) for w in shown] == [("The", 1), ("Bank's", 2 + 3 + 4), ("ATM", 5)]


@pytest.mark.parametrize(
    "pieces, texts, expected",
    [
        (["i", "[UNK]", "[UNK]", "x"], ["I 😀 🤗 x"], [("I", 1), ("😀", 2), ("🤗", 3), ("x", 4)]),
        (["cafe", "is", "good"], ["Café is  good, very good"], [("Café", 1), ("is", 2), ("good,", 3)]),
    ],
)
def test_words_the_tokenizer_spells_otherwise_or_never_read_keep_their_place(pieces, texts, expected):
    merged = [words.Word(text, float(i + 1), 0) for i, text in enumerate(pieces)]
    assert [(w.text, w.weight) for w in words.in_texts(merged, texts)] == expected


def test_a_pairs_words_are_laid_on_the_text_they_come_from():
    merged = [words.Word("good", 1.0, 0), words.Word("bad", 2.0, 1), words.Word("day", 3.0, 1)]
    shown = words.in_texts(merged, ["Good!", "BAD day."])
    assert [(w.text, w.weight, w.segment) for w in shown] == [("Good!", 1, 0), ("BAD", 2, 1), ("day.", 3, 1)]


class SlowModel:
    """The planted export, each of whose explain_tokens calls takes `seconds_per_token` of a
    fake clock per token it integrates (rows x width x points)."""

    def __init__(self, model, seconds_per_token: float):
        self.model, self.seconds_per_token, self.now, self.calls = model, seconds_per_token, 0.0, []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def explain_tokens(self, features, target, alphas, weights):
        tokens = int(np.prod(features["input_word_ids"].shape)) * len(alphas)
        self.calls.append(tokens)
        self.now += tokens * self.seconds_per_token
        return self.model.explain_tokens(features, target, alphas, weights)

    def timer(self) -> float:
        return self.now


def test_a_slow_models_explaining_is_split_into_calls_of_about_two_seconds(planted_model):
    """Ctrl-C waits for the explain_tokens call that is running: none may take minutes."""
    from trainer.explaining import attribute, pacing

    _, model, rows = planted_model
    slow = SlowModel(model, seconds_per_token=0.01)  # a row's 33 points: 5.3 s
    texts = [text for text, _ in rows[:8]]
    attribute.explain_texts(slow, texts, pace=pacing.Pace(timer=slow.timer), max_steps_factor=1)
    assert sum(slow.calls) == sum(33 * width for width in _widths(model, texts))  # all of it
    first, *timed = slow.calls
    assert first <= pacing.FIRST_CALL_TOKENS
    assert max(timed) * slow.seconds_per_token <= 2.0  # seconds


def _widths(model, texts):
    """Each text's padded width, as explaining batches it."""
    from trainer.data.input_pipeline import padded_lengths
    from trainer.inference import loaded_model

    lengths = loaded_model.tokenize(model, texts)["input_mask"].sum(axis=1)
    ladder = np.asarray(loaded_model.ladder_of(model) or padded_lengths(16))
    return ladder[np.searchsorted(ladder, lengths)]


def test_a_budget_explains_texts_in_order_and_lists_those_it_had_no_time_for(planted_model):
    from trainer.explaining import attribute, pacing

    _, model, rows = planted_model
    texts = [text for text, _ in rows[:6]]
    width = _widths(model, texts).max()
    slow = SlowModel(model, seconds_per_token=0.16 / width)  # a row of 33 points: up to 5.3 s
    pace = pacing.Pace(budget=12.0, timer=slow.timer)
    explained = attribute.explain_texts(slow, texts, pace=pace)
    assert [len(row) for row in explained] == [1, 1, 0, 0, 0, 0]
    assert [row for row, _ in pace.left_out] == [2, 3, 4, 5]
    assert all(e.steps == 32 for row in explained for e in row)  # no time to raise any steps
    assert sum(slow.calls) * slow.seconds_per_token <= 12.0


def test_steps_are_raised_for_rows_that_miss_only_within_the_budget(planted_model):
    from trainer.explaining import attribute, pacing

    _, model, rows = planted_model
    texts = [text for text, _ in rows[:6]]
    unlimited = attribute.explain_texts(model, texts, steps=1)
    assert any(e.steps > 1 for row in unlimited for e in row)  # one step misses on some rows
    slow = SlowModel(model, seconds_per_token=0.01)  # a row at 1 step: 2 x 16 tokens, 0.32 s
    pace = pacing.Pace(budget=2.0, timer=slow.timer)
    explained = attribute.explain_texts(slow, texts, steps=1, pace=pace)
    assert all(len(row) == 1 for row in explained) and not pace.left_out
    assert sum(slow.calls) * slow.seconds_per_token <= 2.0
    missed = [e for row in explained for e in row if e.completeness_error > attribute.TOLERANCE]
    assert missed and all(e.steps < attribute.MAX_STEPS_FACTOR for e in missed)


def test_the_budget_is_a_tenth_of_the_runs_training_time_and_at_least_10_seconds():
    from trainer.reporting import explanations

    assert explanations.budget_seconds(1800.0) == 180.0  # after a 30-minute run: 3 minutes
    assert explanations.budget_seconds(4.0) == explanations.budget_seconds(None) == 10.0


def test_the_report_says_which_rows_the_budget_left_out_and_which_do_not_add_up(planted_model, monkeypatch):
    from trainer.reporting import explanations
    from trainer.serving import export

    model_dir, model, rows = planted_model
    slow = SlowModel(model, seconds_per_token=0.05)  # at 1 step a row is 1.6 s: 10 s hold 6
    monkeypatch.setattr(export, "load_module", lambda _: slow)
    predictions = _validation(rows)
    section = explanations.report_section(
        model_dir, predictions, LABELS, CLASSIFICATION, 1, seed=0, count=40, train_seconds=60.0, timer=slow.timer
    )
    assert section["budget"]["seconds"] == 10.0 and section["budget"]["spent"] <= 10.0
    left = [r["row"] for r in section["left_out"]]
    explained = [e["row"] for e in section["entries"] if e["explained"]]
    assert explained and left and max(explained) < min(left)  # all correct: explained in row order
    assert section["incomplete"] and {r["why"] for r in section["incomplete"]} == {"budget"}
    page = html.unescape(_section_html(section))
    assert "Explaining had a time budget of 10s, 10% of the run's training time (1m00s) but at least 10s," in page
    assert f"Not explained, the budget being spent before them: row {left[0]}" in page
    assert page.count("not explained: the time budget was spent") == len(left)
    assert "Not within 5%, so their colours are approximate: row" in page


def _section_html(section: dict) -> str:
    """report.html's explanations section (the template report.html includes) of `section`."""
    import jinja2

    templates = jinja2.Environment(
        loader=jinja2.PackageLoader("trainer.reporting", "templates"), autoescape=True, undefined=jinja2.StrictUndefined
    )
    return templates.get_template("explanations.html.j2").render(explanations=section)


def test_the_report_colours_the_texts_own_words(planted_model, monkeypatch):
    from trainer.reporting import explanations
    from trainer.serving import export

    model_dir, model, rows = planted_model
    monkeypatch.setattr(export, "load_module", lambda _: model)  # loaded already
    rows = [("This Movie's GREAT", "positive")] + rows
    section = explanations.report_section(
        model_dir, _validation(rows, errors=1), LABELS, CLASSIFICATION, 32, seed=0, count=2
    )
    (first,) = [e for e in section["entries"] if e["row"] == 0]
    shown = re.findall(r'<span class="w"[^>]*>([^<]*)</span>', first["text"])
    assert [html.unescape(word) for word in shown] == ["This", "Movie's", "GREAT"]


def _validation(rows, errors: int = 0) -> dict:
    """A validation split predicting each row's label, the first `errors` rows' wrongly."""
    from trainer.inference.split_predictions import SplitPredictions

    texts = np.asarray([text for text, _ in rows], dtype=object)
    labels = np.asarray([LABELS.index(label) for _, label in rows])
    probabilities = np.eye(3)[labels] * 0.9 + 0.1 / 3
    labels[:errors] = (labels[:errors] + 1) % 3
    return {"validation": SplitPredictions(texts, labels, probabilities, np.log(probabilities))}


@pytest.mark.slow  # a server process: about 10 s on an idle machine
def test_serve_answers_explain_true_with_the_attributions_trainer_explain_writes(planted_model, tmp_path):
    import httpx
    from test_server import Server, environ, free_port

    model_dir, _, rows = planted_model
    texts = [text for text, _ in rows[:3]]
    (tmp_path / "in.csv").write_text("text\n" + "".join(f"{text}\n" for text in texts))
    result = run_in_process(
        "--model-dir",
        model_dir,
        "--input",
        str(tmp_path / "in.csv"),
        "--output",
        str(tmp_path / "out.jsonl"),
        "--top-k",
        "100",
        module="trainer.explain",
    )
    assert result.returncode == 0, result.stderr
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    port = free_port()
    server = Server(["--model-dir", model_dir, "--port", str(port)], environ(), "/health", tmp_path / "log")
    try:
        server.wait_ready(port)
        url = server.url(port, "/predict")
        plain = httpx.post(url, json={"instances": texts}, timeout=60).json()["predictions"]
        answer = httpx.post(url, json={"instances": texts, "parameters": {"explain": True}}, timeout=120).json()[
            "predictions"
        ]
    finally:
        server.stop()
    assert all("explanations" not in p for p in plain)
    for prediction, row in zip(answer, written):
        (explanation,) = prediction["explanations"]
        assert explanation["label"] == row["explained_label"] == prediction["label"]
        served = sorted((w["word"], w["weight"]) for w in explanation["words"])
        expected = sorted((w["word"], w["weight"]) for w in row["top_words"])
        assert [word for word, _ in served] == [word for word, _ in expected]
        assert [weight for _, weight in served] == pytest.approx([weight for _, weight in expected], abs=1e-5)


@pytest.fixture(scope="module")
def untrained_exports(tiny_encoder_dir, tmp_path_factory):
    """{kind: a loaded export of an untrained tiny classifier}: regression, multi-label, and a
    sentence-pair classifier (completeness holds for any weights)."""
    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.serving import export

    encoder = load_encoder(tiny_encoder_dir, seq_length=16, cache_dir=str(tmp_path_factory.mktemp("cache")))
    modules = {
        "regression": export.ServingModule(
            encoder.preprocessor,
            heads.build_classifier(encoder.network, 1, "mean", 0.0),
            [],
            16,
            task=task_registry.by_name("regression"),
        ),
        "multi-label": export.ServingModule(
            encoder.preprocessor,
            heads.build_classifier(encoder.network, 3, "mean", 0.0),
            LABELS,
            16,
            task=task_registry.by_name("multi-label"),
            decisions={"thresholds": [0.0, 0.0, 1.0]},
        ),
        "pair": export.ServingModule(
            encoder.preprocessor, heads.build_classifier(encoder.network, 3, "mean", 0.0), LABELS, 16, pair=True
        ),
    }
    root = tmp_path_factory.mktemp("untrained")
    for kind, module in modules.items():
        export.export(module, str(root / kind))
    return {kind: export.load_module(str(root / kind)) for kind in modules}


@pytest.mark.slow  # three exports: about 15 s
@pytest.mark.parametrize(
    "kind, targets", [("regression", [None]), ("multi-label", ["negative", "neutral"]), ("pair", None)]
)
def test_every_task_kind_is_explained_and_adds_up(untrained_exports, kind, targets):
    from trainer.explaining import attribute

    model = untrained_exports[kind]
    texts = [text for text, _ in planted_rows(6, seed=3)]
    pairs = texts[::-1] if kind == "pair" else None
    explained = attribute.explain_texts(model, texts, pairs)
    for row in explained:
        assert targets is None or [e.target for e in row] == targets  # multi-label: each chosen label
        assert all(e.completeness_error <= 0.05 for e in row)
        assert {w.segment for e in row for w in e.words} == ({0, 1} if kind == "pair" else {0})


# --- issue 64: a tagger's explanations refused before any work --------------------------------------


@pytest.fixture(scope="module")
def tagger_dir(tiny_encoder_dir, tmp_path_factory):
    """An untrained tiny tagger's export."""
    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.serving import export
    from trainer.tasks.tagging import export as tagger_export

    encoder = load_encoder(tiny_encoder_dir, seq_length=16, cache_dir=str(tmp_path_factory.mktemp("cache")))
    tagger = heads.build_tagger(encoder.network, 3, 0.0, 16)
    path = tmp_path_factory.mktemp("tagger") / "model"
    export.export(tagger_export.TaggingModule(encoder.preprocessor, tagger, ["O", "B-PER", "I-PER"], 16), str(path))
    return path


TAGGER_REFUSED = (
    "cannot explain its predictions: needs a model answering for a whole text; --task "
    "token-classification has no answer for a whole text to attribute to its words"
)


@pytest.mark.slow  # tagger_dir: a tagger exported (CI's slow line)
def test_explain_refuses_a_tagger_before_its_model_loads(tagger_dir, tmp_path):
    from unittest import mock

    source = tmp_path / "in.csv"
    source.write_text("text\nAnna lives in Paris\n")
    with mock.patch("trainer.serving.export.load_module", side_effect=AssertionError("the model loaded")):
        result = run_in_process("--model-dir", tagger_dir, "--input", source, module="trainer.explain")
    assert result.stderr.splitlines() == [f"error: --model-dir: {tagger_dir} {TAGGER_REFUSED}"]
    assert result.returncode == 2 and not list(tmp_path.glob("in-explained*"))


@pytest.mark.slow  # tagger_dir: a tagger exported (CI's slow line)
def test_a_tagger_server_answers_an_explain_request_400_before_predicting(tagger_dir):
    """Issue #64: the 400 came after 5.2 s: the texts were predicted, then the float32 model
    loaded to explain them, and only then was the tagger refused."""
    import asyncio

    import httpx

    from trainer.serving import server
    from trainer.vertex import environment

    class Loaded(server.ModelService):
        ready = True

        async def predict(self, texts):
            raise AssertionError("predicted")

    service = Loaded(str(tagger_dir), 8, 0.005)
    service.load()
    app = server.build_app(service, environment.ServingEnvironment(), max_instances=8, access_log=False)

    async def send():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.post("/predict", json={"instances": ["Anna"], "parameters": {"explain": True}})

    response = asyncio.run(send())
    assert (response.status_code, response.json()) == (400, {"error": f"--model-dir: {tagger_dir} {TAGGER_REFUSED}"})
