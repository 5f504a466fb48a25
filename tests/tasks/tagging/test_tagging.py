"""`--task token-classification` (trainer/tasks/tagging/): tagged sentences in, entities with
character offsets out, the way a user runs it.

The numbers are checked against hand-computed values on fixed arrays; one tiny run (slow tier:
a tiny encoder learning that "good" and "great" begin a POS entity, "bad" and "awful" a NEG one)
is exported, predicted and served in fresh processes.
"""

import json
import random

import numpy as np
import pytest
from conftest import TINY_TASK_FLAGS
from test_task import run_cli, run_in_process

NAME = "token-classification"
WORDS = "i love hate this movie it is was not good bad great awful fine ok the so very meh a".split()


def tagged_sentence(rng):
    """(word, tag) pairs: good/great begin POS (a movie right after continues it), bad/awful NEG."""
    pairs = []
    for _ in range(rng.randint(3, 7)):
        word = rng.choice(WORDS)
        tag = (
            "B-POS"
            if word in ("good", "great")
            else "B-NEG"
            if word in ("bad", "awful")
            else "I-POS"
            if word == "movie" and pairs and pairs[-1][1].endswith("POS")
            else "O"
        )
        pairs.append((word, tag))
    return pairs


def write_conll(path, sentences):
    path.write_text("".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n" for s in sentences))
    return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tagging_data")
    rng = random.Random(1)
    return {
        name: write_conll(root / f"{name}.conll", [tagged_sentence(rng) for _ in range(count)])
        for name, count in (("train", 200), ("validation", 40))
    }


def args(tiny_encoder_dir, data, job_dir, *extra):
    return [
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        data["train"],
        "--validation-file",
        data["validation"],
        "--job-dir",
        job_dir,
        "--epochs",
        "12",
        "--batch-size",
        "16",
        "--learning-rate",
        "1e-2",
        "--max-seq-length",
        "32",
        *TINY_TASK_FLAGS,
        *extra,
    ]


# --- the numbers, by hand ------------------------------------------------------------------------

NAMES = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def logits_of(tag_ids, width=5):
    """Logits whose most probable tag is `tag_ids` (each 2 above the rest)."""
    out = np.zeros([*np.shape(tag_ids), width])
    np.put_along_axis(out, np.maximum(np.asarray(tag_ids), 0)[..., None], 2.0, axis=-1)
    return out


def test_a_splits_entity_scores_read_each_words_first_piece_only():
    from trainer.tasks.tagging import numbers

    # Token-aligned truth: [CLS] w0 w1 ##piece w2 [SEP]; gold PER(w0-w1), LOC(w2).
    labels = np.array([[-1, 1, 2, -1, 3, -1]])
    # Predicted: PER(w0-w1) right; w2 O (LOC missed); the later piece's LOC is not a word's.
    predicted = np.array([[0, 1, 2, 3, 0, 0]])
    result = numbers.summarize(logits_of(predicted), labels, NAMES)
    assert (result["precision"], result["recall"]) == (1.0, 0.5)
    assert result["f1"] == pytest.approx(2 / 3)
    assert result["tag_accuracy"] == pytest.approx(2 / 3)
    assert result["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}


def test_the_loss_is_the_mean_cross_entropy_of_tagged_words_per_sentence():
    from trainer.tasks.tagging import numbers

    labels = np.array([[-1, 0, 1, -1], [-1, 3, -1, -1]])
    logits = np.zeros([2, 4, 5])  # uniform: every tagged word costs log 5
    assert numbers.summarize(logits, labels, NAMES)["loss"] == pytest.approx(np.log(5))


def test_the_type_confusion_matches_entities_by_their_words():
    from trainer.tasks.tagging import numbers

    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "O"]]
    predicted = [["B-LOC", "I-LOC", "O", "O"], ["B-LOC", "B-PER"]]
    confusion = numbers.type_confusion(gold, predicted, NAMES)
    assert confusion["types"] == ["PER", "LOC", "(none)"]
    # PER words 0-1 read as LOC; LOC word 3 missed; LOC right; a PER where there is none.
    assert confusion["matrix"] == [[0, 1, 0], [0, 1, 1], [1, 0, 0]]


def test_entity_counts_are_per_type_by_the_strict_rules():
    from trainer.tasks.tagging import numbers

    # PER, LOC, and an I-LOC after O that begins nothing.
    tag_ids = np.array([[1, 2, 0, 3], [0, 4, -1, -1]])
    assert numbers.entity_counts(tag_ids, NAMES) == {"LOC": 1, "PER": 1}


def test_errors_csv_lists_each_sides_entities_by_word():
    from trainer.inference.split_predictions import SplitPredictions
    from trainer.tasks.tagging import numbers

    labels = np.array([[-1, 1, 2, 3, -1], [-1, 0, 0, -1, -1]])
    predicted = np.array([[-1, 1, 2, 0, -1], [-1, 0, 0, -1, -1]])
    wrong, is_error, columns = numbers.error_measure(
        SplitPredictions(np.array(["a b c", "d e"], object), labels, None, None, predicted=predicted), NAMES
    )
    assert wrong.tolist() == [1.0, 0.0] and is_error.tolist() == [True, False]
    assert columns["gold_entities"][0] == "PER words 0-1; LOC words 2-2"
    assert columns["predicted_entities"][0] == "PER words 0-1"


def test_a_copy_is_checked_on_the_entities_and_offsets_it_returns():
    """The int8 and bfloat16 copies' check (trainer.serving.agreement) on a tagger's answers:
    the copy's entities are matched to float32's by type and offsets (an F1), and entity F1 is
    by type and offsets against the tagged file's entities."""
    from trainer.serving import agreement
    from trainer.tasks.tagging import TaggingTask, files, numbers

    gold = numbers.gold_spans(
        [
            files.joined(["Ann", "met", "Bob", "Lee"], ["B-PER", "O", "B-PER", "I-PER"], "x"),
            files.joined(["in", "Rome"], ["O", "B-LOC"], "y"),
        ]
    )
    assert gold.tolist() == [{("PER", 0, 3), ("PER", 8, 15)}, {("LOC", 3, 7)}]

    def exported(*rows):  # entity_label/start/end/count as predict_outputs returns them
        width = max(map(len, rows))
        pad = [[("", -1, -1)] * (width - len(row)) for row in rows]
        full = [list(row) + extra for row, extra in zip(rows, pad)]
        return {
            "entity_label": np.array([[e[0].encode() for e in r] for r in full], object),
            "entity_start": np.array([[e[1] for e in r] for r in full]),
            "entity_end": np.array([[e[2] for e in r] for r in full]),
            "entity_count": np.array([len(row) for row in rows]),
        }

    task = TaggingTask()
    float32 = task.agreement_values(exported([("PER", 0, 3), ("PER", 8, 15)], [("LOC", 3, 7)]))
    copy = task.agreement_values(exported([("PER", 0, 3), ("PER", 8, 11)], [("LOC", 3, 7)]))
    figures = agreement.compare(task, float32, copy, gold, NAMES)
    assert figures["label_agreement"] == pytest.approx(2 / 3) and figures["metric"] == "f1"
    assert (figures["float32_value"], figures["value"]) == (1.0, pytest.approx(2 / 3))
    assert not figures["passed"] and "entities agree with float32 at 66.67% F1" in figures["why"]


# --- the data, the flags ---------------------------------------------------------------------------


def test_auto_picks_token_classification_for_tagged_sentences(data, tmp_path):
    from trainer import config as config_lib

    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text(json.dumps({"tokens": ["good", "movie"], "tags": ["B-POS", "I-POS"]}) + "\n")
    csv = tmp_path / "train.csv"
    csv.write_text("text,label\ngood,pos\n")
    for path, task in ((data["train"], NAME), (jsonl, NAME), (csv, "auto")):
        config = config_lib.build_config(["--training-file", str(path)], {})
        assert config.model.task == task
    assert config_lib.build_config(["--training-file", data["train"]], {}).train.selection_metric == "val_f1"


def test_tags_are_cut_on_tokens_and_learned_on_each_words_first_piece(tiny_encoder_dir, tmp_path):
    from trainer.modeling.encoders import load_encoder
    from trainer.tasks.tagging import files
    from trainer.tasks.tagging import splits as tagged_splits
    from trainer.tasks.tagging import tokens as tagged_tokens

    path = write_conll(tmp_path / "t.conll", [[("good", "B-POS"), ("movies", "I-POS"), ("!", "O")]])
    split = tagged_splits.tagged_split(
        files.read(path, "--training-file"), path, tagged_splits.LabelSpec("tags", ["O", "B-POS", "I-POS"])
    )
    preprocessor = load_encoder(tiny_encoder_dir, seq_length=8).preprocessor
    tokens, cut, pieceless = tagged_tokens.tokenize_split(split, preprocessor, 8)
    # [CLS] good movie ##s ! [SEP]: "movies" is two pieces, the tag on the first.
    assert tokens.labels[0].tolist() == [-1, 1, 2, -1, 0, -1, -1, -1]
    assert cut.tolist() == [0] and pieceless.tolist() == [0]
    short, cut, pieceless = tagged_tokens.tokenize_split(split, preprocessor, 4)  # [CLS] good movie [SEP]
    assert short.labels[0].tolist() == [-1, 1, 2, -1] and cut.tolist() == [1] and pieceless.tolist() == [0]
    assert short.full_lengths.tolist() == [6]


def test_training_counts_the_sentences_cut_at_max_seq_length_and_their_words(tiny_encoder_dir, tmp_path, caplog):
    """Issue #64: the cut is training's alone (the export reads every word), and the log says
    how many sentences it cut, not only how many words."""
    import logging
    import types

    from trainer.modeling.encoders import load_encoder
    from trainer.tasks.tagging import files
    from trainer.tasks.tagging import splits as tagged_splits
    from trainer.tasks.tagging import tokens as tagged_tokens

    path = write_conll(tmp_path / "t.conll", [[("good", "B-POS"), ("movie", "I-POS"), ("bad", "B-NEG")], [("ok", "O")]])
    split = tagged_splits.tagged_split(
        files.read(path, "--training-file"),
        path,
        tagged_splits.LabelSpec("tags", ["O", "B-NEG", "I-NEG", "B-POS", "I-POS"]),
    )
    _, cut, pieceless = tagged_tokens.tokenize_split(
        split, load_encoder(tiny_encoder_dir, seq_length=4).preprocessor, 4
    )
    with caplog.at_level(logging.WARNING, logger="trainer"):
        tagged_tokens.log_lost({"train": (cut, pieceless)}, types.SimpleNamespace(labelled=lambda: {"train": split}), 4)
    assert "train 1 of 2 sentences (1 of 4 words)" in caplog.text
    assert "the exported model reads every word" in caplog.text


@pytest.mark.parametrize(
    "flags, flag",
    [
        (["--text-pair-column", "b"], "--text-pair-column"),
        (["--label-column", "tags"], "--label-column"),
        (["--long-texts", "windows"], "--long-texts"),
        (["--class-weights", "balanced"], "--class-weights"),
        (["--teacher", "runs/teacher"], "--teacher"),
        (["--target-precision", "0.9"], "--target-precision"),
        (["--find-label-issues"], "--find-label-issues"),
    ],
)
def test_flags_that_mean_nothing_for_tagging_are_refused(data, tmp_path, flags, flag):
    result = run_in_process("--training-file", data["train"], "--job-dir", str(tmp_path / "job"), "--dry-run", *flags)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {flag}"), result.stderr


def test_a_tag_of_a_type_training_never_saw_names_its_line(data, tmp_path):
    bad = write_conll(tmp_path / "dev.conll", [[("paris", "B-LOC")]])
    result = run_in_process(
        "--training-file", data["train"], "--validation-file", bad, "--job-dir", str(tmp_path / "job"), "--dry-run"
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {bad} line 1, token 'paris': tag 'B-LOC' names a type"), result.stderr


# --- one run, end to end ----------------------------------------------------------------------------

# Past the run's --max-seq-length of 32 tokens, read to its end (issue #64); a NUL.
LONG = " ".join(["good movie", "so bad", "i love it"] * 6) + " awful"
TEXTS = ["it was a  good movie , bad 🙂 great", "gréat movie awful", "meh", LONG, "good\x00 bad"]


def tagging_run(tiny_encoder_dir, data, tmp_path_factory, *extra):
    job = tmp_path_factory.mktemp("tagging") / "job"
    result = run_cli(*args(tiny_encoder_dir, data, job, *extra))
    assert result.returncode == 0, result.stdout + result.stderr
    return job


@pytest.fixture(scope="module")
def trained(tiny_encoder_dir, data, tmp_path_factory):
    """The run CI's slow line trains: no copies (a tiny tagger's two checked copies cost about 50 s
    of its 90; the copy tests below, by hand, train their own)."""
    return tagging_run(tiny_encoder_dir, data, tmp_path_factory)


@pytest.fixture(scope="module")
def copies(tiny_encoder_dir, data, tmp_path_factory):
    """The same run with both checked copies (by hand: .ci/run's BY_HAND, docs/testing.md)."""
    return tagging_run(tiny_encoder_dir, data, tmp_path_factory, "--export-int8", "on", "--export-bfloat16", "on")


@pytest.mark.slow
def test_the_run_learns_entities_and_records_f1(trained):
    metrics = json.loads((trained / "metrics.json").read_text())
    assert metrics["task"] == NAME and metrics["labels"] == ["O", "B-NEG", "I-NEG", "B-POS", "I-POS"]
    assert metrics["validation"]["f1"] > 0.8
    assert set(metrics["validation"]["per_type"]) == {"NEG", "POS"}
    assert "val_f1" in (trained / "eval_history.csv").read_text().splitlines()[0]
    assert (trained / "report.html").exists() and (trained / "errors.csv").exists()


def predicted(job_dir, tmp_path, precision):
    """trainer.predict's rows of TEXTS (JSON Lines) with the `precision` model of the run."""
    source, output = tmp_path / "in.jsonl", tmp_path / f"{precision}.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    result = run_cli(
        "--model-dir",
        str(job_dir / "model"),
        "--input",
        str(source),
        "--output",
        str(output),
        "--precision",
        precision,
        module="trainer.predict",
    )
    assert result.returncode == 0 and f"loaded the {precision} model" in result.stdout, result.stderr
    return [json.loads(line) for line in output.read_text().splitlines()]


def served(job_dir, tmp_path, precision):
    """trainer.serve's predictions of TEXTS with the `precision` model of the run."""
    from test_server import Server, environ, free_port

    port = free_port()
    running = Server(
        ["--precision", precision],
        {
            **environ(),
            "AIP_HTTP_PORT": str(port),
            "AIP_HEALTH_ROUTE": "/health",
            "AIP_PREDICT_ROUTE": "/predict",
            "AIP_STORAGE_URI": str(job_dir / "model"),
        },
        "/health",
        tmp_path / "server.log",
    )
    try:
        import httpx

        ready = running.wait_ready(port)
        answer = httpx.post(ready.url(port, "/predict"), json={"instances": TEXTS}, timeout=60).json()
    finally:
        running.stop()
    assert f"model ready: {precision}" in (tmp_path / "server.log").read_text()
    return answer["predictions"]


def answers(rows):
    return [{"entities": row["entities"], "words": row["words"], "tags": row["tags"]} for row in rows]


@pytest.mark.slow
def test_predict_and_serve_return_the_exports_entities_with_offsets_into_the_text(trained, tmp_path):
    from trainer.inference import loaded_model
    from trainer.serving import export

    model = export.load_module(str(trained / "model"))
    task = loaded_model.task_of(model)
    in_process = task.served_predictions(loaded_model.task_outputs(model, task, TEXTS, 8))
    for text, answer in zip(TEXTS, in_process):
        assert all(text[e["start"] : e["end"]] == e["text"] for e in answer["entities"])
    assert in_process[0]["entities"]  # the offsets above were checked on entities, not on none
    long_words = in_process[3]["words"]  # every one tagged, entities found past the 32 tokens
    assert len(long_words) == len(LONG.split()) and all(word["tag"] for word in long_words)
    assert in_process[3]["entities"][-1]["start"] > long_words[32]["start"]
    assert [word["text"] for word in in_process[4]["words"]] == ["good", "bad"]
    assert answers(predicted(trained, tmp_path, "float32")) == in_process
    assert served(trained, tmp_path, "float32") == in_process


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["int8", "bfloat16"])
def test_each_copy_is_checked_on_entity_f1_and_predicts_the_same_entities(copies, tmp_path, precision):
    block = json.loads((copies / "metrics.json").read_text())["precisions"][precision]
    assert block["written"] and block["metric"] == "f1" and block["label_agreement"] >= 0.99, block
    assert block["label_agreement_of"] == "entities"
    written = {asked: predicted(copies, tmp_path, asked) for asked in ("float32", precision)}
    found = {
        asked: [[{k: e[k] for k in ("text", "label", "start", "end")} for e in row["entities"]] for row in rows]
        for asked, rows in written.items()
    }
    assert found[precision] == found["float32"] and any(found["float32"])
    assert [row["tags"] for row in written[precision]] == [row["tags"] for row in written["float32"]]


@pytest.mark.slow
def test_the_server_answers_with_the_int8_tagger_as_predict_does(copies, tmp_path):
    assert served(copies, tmp_path, "int8") == answers(predicted(copies, tmp_path, "int8"))


# --- every family: offsets into the raw string -----------------------------------------------------

TRICKY = "  Ünïcödé   café,🙂 São Paulo  (ok) "


@pytest.mark.slow  # run by hand (.ci/run's BY_HAND, docs/testing.md), not in CI
@pytest.mark.parametrize("family", sorted(__import__("hf_reference").families()))
def test_every_familys_export_returns_entities_at_exact_offsets_of_the_raw_string(family, tmp_path):
    """A tagger on each family's tiny checkpoint, its head biased to B-X for every word: each
    word is an entity, and every entity's and word's offsets slice the raw string (accents,
    an emoji, runs of spaces) to its text, in a text that fits and in one read in windows.
    (The saved export answers as the module does: the run above reloads one in fresh
    processes.)"""
    import hf_reference
    import tensorflow as tf

    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.tasks.tagging import export as tagger_export

    encoder = load_encoder(hf_reference.write_checkpoint(family, tmp_path / "ckpt"), seq_length=48)
    tagger = heads.build_tagger(encoder.network, len(NAMES), 0.1, 48)
    tagger.get_layer("logits").bias.assign([0.0, 50.0, 0.0, 0.0, 0.0])  # B-PER everywhere
    long = TRICKY * 8  # past 48 tokens in every family: read in windows
    outputs = tagger_export.TaggingModule(encoder.preprocessor, tagger, NAMES, 48).serve(tf.constant([TRICKY, long]))
    expected = ["Ünïcödé", "café", ",", "🙂", "São", "Paulo", "(", "ok", ")"]
    for row, text in enumerate([TRICKY, long]):
        words = [
            text[a:b]
            for a, b in zip(
                outputs["word_start"][row].numpy()[: outputs["word_count"][row]], outputs["word_end"][row].numpy()
            )
        ]
        assert words == expected * (1 if row == 0 else 8)
        count = int(outputs["entity_count"][row])
        entities = [
            (text[s:e], t.decode())
            for s, e, t in zip(
                outputs["entity_start"][row].numpy()[:count],
                outputs["entity_end"][row].numpy(),
                outputs["entity_text"][row].numpy(),
            )
        ]
        assert [found for _, found in entities] == words
        assert all(sliced == found for sliced, found in entities)
