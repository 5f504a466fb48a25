"""Distilling a tagger (issue #52, Build 5): a teacher's tag probabilities per word, from a file
(an LLM's) or a trained tagger's export, train the student on tagged and untagged sentences.

The default suite holds the teacher file's reading and errors, the packed layout and the loss on
fixed arrays, and dry runs; the slow tier (by hand: docs/testing.md) trains a tiny teacher
tagger and its student from the teacher's export.
"""

import json
import random

import numpy as np
import pytest
from conftest import metrics_of
from test_tagging import args, data, tagged_sentence, write_conll  # noqa: F401 (fixture)
from test_task import run_cli, run_in_process

NAMES = ["O", "B-NEG", "I-NEG", "B-POS", "I-POS"]


def teacher_line(tokens, tags, confidence=0.9):
    """A teacher file's row: `confidence` on each word's tag, the rest on O (or on B-POS for an
    O word)."""
    other = lambda tag: "O" if tag != "O" else "B-POS"  # noqa: E731
    return {
        "tokens": list(tokens),
        "probabilities": [{tag: confidence, other(tag): round(1 - confidence, 6)} for tag in tags],
    }


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def conll_sentences(path):
    sentences, words = [], []
    for line in open(path).read().splitlines() + [""]:
        if line.strip():
            words.append(line.split("\t"))
        elif words:
            sentences.append(words)
            words = []
    return sentences


def teacher_file_of(path, *conll_files, extra=()):
    """A teacher file of every sentence of `conll_files`, each word's tag at 0.9."""
    rows = [teacher_line([w for w, _ in s], [t for _, t in s]) for f in conll_files for s in conll_sentences(f)]
    return write_jsonl(path, [*rows, *extra])


# --- the teacher file ---------------------------------------------------------------------------


def sentences_of(*token_lists):
    from trainer.tasks.tagging import files

    return [files.joined(tokens, ["O"] * len(tokens), "x line 1") for tokens in token_lists]


def test_a_teacher_file_gives_each_word_its_tags_probabilities_in_the_runs_order(tmp_path):
    from trainer.tasks.tagging import numbers
    from trainer.tasks.tagging import teacher_file as tagged_teacher

    path = write_jsonl(
        tmp_path / "t.jsonl",
        [{"tokens": ["a", "good", "movie"], "probabilities": [{"O": 1.0}, {"B-POS": 0.75, "O": 0.25}, None]}],
    )
    teacher = tagged_teacher.read(path, NAMES)
    values = tagged_teacher.match(teacher, sentences_of(["a", "good", "movie"]), 4, "train", numbers.teacher_problem)
    assert values.shape == (1, 4, 5)
    np.testing.assert_allclose(values[0, :3], [[1, 0, 0, 0, 0], [0.25, 0, 0, 0.75, 0], [0] * 5])
    assert np.isnan(values[0, 3]).all()  # past the sentence's words


@pytest.mark.parametrize(
    "row, message",
    [
        ({"tokens": ["a", "b"], "probabilities": [{"O": 1.0}]}, "2 tokens but 1 probabilities"),
        (
            {"tokens": ["a"], "probabilities": [{"B-LOC": 1.0}]},
            "token 1 names tag 'B-LOC', which this run's data does not have",
        ),
        ({"tokens": ["a"], "probabilities": [{"O": "high"}]}, "token 1's probability of O is 'high', not a number"),
        ({"tokens": ["a"], "tags": ["O"]}, "a sentence needs 'tokens' and 'probabilities'"),
    ],
)
def test_a_malformed_teacher_row_names_its_file_and_line(tmp_path, row, message):
    from trainer.errors import UserError
    from trainer.tasks.tagging import teacher_file as tagged_teacher

    path = write_jsonl(tmp_path / "t.jsonl", [{"tokens": ["x"], "probabilities": [None]}, row])
    with pytest.raises(UserError, match="^--teacher-probabilities: ") as error:
        tagged_teacher.read(path, NAMES)
    assert f"{path} line 2: {message}" in str(error.value)


def test_probabilities_that_do_not_sum_to_one_name_the_line_and_token(tmp_path):
    from trainer.errors import UserError
    from trainer.tasks.tagging import numbers
    from trainer.tasks.tagging import teacher_file as tagged_teacher

    path = write_jsonl(
        tmp_path / "t.jsonl", [{"tokens": ["a", "b"], "probabilities": [{"O": 1.0}, {"O": 0.5, "B-NEG": 0.3}]}]
    )
    teacher = tagged_teacher.read(path, NAMES)
    with pytest.raises(UserError, match=f"{path} line 1: token 2's probabilities sum to 0.8, not 1"):
        tagged_teacher.match(teacher, sentences_of(["a", "b"]), 2, "train", numbers.teacher_problem)


def test_a_sentence_the_file_lacks_is_one_error_with_their_count(tmp_path):
    from trainer.errors import UserError
    from trainer.tasks.tagging import numbers
    from trainer.tasks.tagging import teacher_file as tagged_teacher

    teacher = tagged_teacher.read(write_jsonl(tmp_path / "t.jsonl", [teacher_line(["a"], ["O"])]), NAMES)
    with pytest.raises(UserError, match=r"has no row for 2 of the 3 train sentences, e.g. 'b c'"):
        tagged_teacher.match(teacher, sentences_of(["a"], ["b", "c"], ["d"]), 2, "train", numbers.teacher_problem)


# --- packed targets and the loss ---------------------------------------------------------------


def test_packed_targets_line_up_with_tokens_as_the_tags_do():
    from trainer.tasks.tagging import distill
    from trainer.tasks.tagging.tokens import aligned_labels

    teacher = np.full([2, 2, 2], np.nan)
    teacher[0] = [[0.8, 0.2], [0.0, 0.0]]  # a labelled sentence of 2 words, the second untaught
    teacher[1, 0] = [0.4, 0.6]  # an unlabelled sentence of 1 word
    labelled = distill.pack(np.array([[1, 0]]), teacher[:1])
    unlabelled = distill.pack(None, teacher[1:])
    packed = np.concatenate([labelled, unlabelled])
    # Word positions: sentence 0's words at tokens 1 and 3, sentence 1's at token 1.
    aligned = aligned_labels(np.array([[1, 3], [1, -1]]), packed, 5)
    assert aligned[..., 0].tolist() == [[-1, 1, -1, 0, -1], [-1, distill.UNLABELLED, -1, -1, -1]]
    np.testing.assert_allclose(aligned[0, 1, 1:], [0.8, 0.2])
    np.testing.assert_allclose(aligned[1, 1, 1:], [0.4, 0.6])
    assert not aligned[0, [0, 2, 3, 4], 1:].any()  # untaught word and non-word tokens: no teacher


def test_the_loss_is_the_tag_loss_at_alpha_1_and_the_teachers_alone_on_unlabelled_words():
    import tensorflow as tf

    from trainer.tasks.tagging import distill
    from trainer.tasks.tagging.keras import TagLoss

    logits = tf.constant(np.random.RandomState(0).normal(size=[1, 3, 2]), tf.float32)
    teacher = np.array([[[0.9, 0.1], [0.3, 0.7], [np.nan, np.nan]]])
    labelled = tf.constant(distill.pack(np.array([[1, 0, -1]]), teacher))
    plain = TagLoss()(tf.constant([[1, 0, -1]]), logits)
    assert float(distill.TagDistillationLoss(2.0, 1.0)(labelled, logits)) == pytest.approx(float(plain))
    # Unlabelled words learn from the teacher alone: T^2 KL at T = 1, the mean of the two words.
    unlabelled = tf.constant(distill.pack(None, teacher))
    p, q = teacher[0, :2], tf.nn.softmax(logits[0, :2]).numpy()
    expected = np.mean(np.sum(p * (np.log(p) - np.log(q)), axis=-1))
    assert float(distill.TagDistillationLoss(1.0, 0.5)(unlabelled, logits)) == pytest.approx(0.5 * expected, rel=1e-5)


def test_training_accuracy_counts_labelled_words_only():
    import tensorflow as tf

    from trainer.tasks.tagging import distill

    teacher = np.array([[[0.9, 0.1], [0.3, 0.7]], [[0.5, 0.5], [np.nan, np.nan]]])
    packed = np.concatenate([distill.pack(np.array([[1, 0]]), teacher[:1]), distill.pack(None, teacher[1:])])
    logits = tf.constant([[[0.0, 1.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]])
    metric = distill.LabelledTagAccuracy()
    metric.update_state(tf.constant(packed), logits)
    assert float(metric.result()) == 0.5  # word 1 right, word 2 wrong; the unlabelled one not counted


# --- runs ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unlabeled(tmp_path_factory, data):  # noqa: F811
    """Untagged sentences: 30 of their own, and one that is a validation sentence (dropped)."""
    rng = random.Random(7)
    own = [[w for w, _ in tagged_sentence(rng)] for _ in range(30)]
    shown = [w for w, _ in conll_sentences(data["validation"])[0]]
    return write_jsonl(
        tmp_path_factory.mktemp("unlabeled") / "unlabeled.jsonl", [{"tokens": tokens} for tokens in [*own, shown]]
    )


def own_teacher_file(path, data, unlabeled):  # noqa: F811
    rows = [
        teacher_line(r["tokens"], ["O"] * len(r["tokens"]))
        for r in map(json.loads, open(unlabeled).read().splitlines())
    ]
    return teacher_file_of(path, data["train"], data["validation"], extra=rows)


@pytest.mark.slow  # a tagger's dry run, export included (CI's slow line)
def test_a_dry_run_from_a_teacher_file_records_the_distillation(
    tiny_encoder_dir,
    data,  # noqa: F811
    unlabeled,
    tmp_path,
):
    probabilities = own_teacher_file(tmp_path / "teacher.jsonl", data, unlabeled)
    result = run_in_process(
        *args(
            tiny_encoder_dir,
            data,
            tmp_path / "job",
            "--dry-run",
            "--teacher-probabilities",
            probabilities,
            "--unlabeled-file",
            unlabeled,
        )
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "unlabeled sentences: 30 of 31 of" in result.stdout + result.stderr
    block = metrics_of(tmp_path / "job")["distillation"]
    assert block["teacher_kind"] == "file" and block["transfer_set"]["unlabeled"] > 0
    # The teacher's validation scores: it gives each word its own tag at 0.9.
    assert block["validation"]["teacher"]["f1"] == 1.0


def test_a_teacher_file_missing_a_training_sentence_stops_the_run(tiny_encoder_dir, data, tmp_path):  # noqa: F811
    first = conll_sentences(data["train"])[0]
    probabilities = write_jsonl(
        tmp_path / "teacher.jsonl", [teacher_line([w for w, _ in first], [t for _, t in first])]
    )
    result = run_in_process(
        *args(tiny_encoder_dir, data, tmp_path / "job", "--dry-run", "--teacher-probabilities", probabilities)
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: --teacher-probabilities: {probabilities} has no row for "), result.stderr


def test_a_model_that_is_no_tagger_is_refused_as_a_teacher():
    from types import SimpleNamespace

    from trainer.errors import UserError
    from trainer.serving import export
    from trainer.tasks.tagging import TaggingTask
    from trainer.tasks.tagging import teacher as tagger_teacher

    outputs = {"probabilities": None, "label_index": None, "label_names": None}
    model = SimpleNamespace(signatures={export.SIGNATURE: SimpleNamespace(structured_outputs=outputs)})
    with pytest.raises(UserError, match="^--teacher: runs/t/model is a classification model, not a tagger"):
        tagger_teacher.tag_order(model, "runs/t/model", NAMES, TaggingTask())


# --- slow: a tagger as the teacher --------------------------------------------------------------


@pytest.fixture(scope="module")
def student(tiny_encoder_dir, data, unlabeled, tmp_path_factory):  # noqa: F811
    root = tmp_path_factory.mktemp("tagging_teacher")
    teacher = run_cli(*args(tiny_encoder_dir, data, root / "teacher"))
    assert teacher.returncode == 0, teacher.stdout + teacher.stderr
    result = run_cli(
        *args(
            tiny_encoder_dir,
            data,
            root / "student",
            "--teacher",
            str(root / "teacher" / "model"),
            "--unlabeled-file",
            unlabeled,
        )
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return root


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_a_tagger_teaches_its_student_every_word_of_every_sentence(student, data):  # noqa: F811
    written = list((student / "student" / "teacher").glob("*.jsonl"))
    assert len(written) == 1
    rows = [json.loads(line) for line in written[0].read_text().splitlines()]
    train = conll_sentences(data["train"])
    # Training (200), unlabeled (30 kept) and validation (40) sentences, each word a distribution.
    assert len(rows) == 200 + 30 + 40
    assert rows[0]["tokens"] == [w for w, _ in train[0]]
    assert all(abs(sum(p.values()) - 1) < 1e-3 for row in rows for p in row["probabilities"])


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_a_tagger_of_other_types_is_refused_as_a_teacher(student):
    from trainer.errors import UserError
    from trainer.serving import variants
    from trainer.tasks.tagging import TaggingTask
    from trainer.tasks.tagging import teacher as tagger_teacher

    model_dir = str(student / "teacher" / "model")
    with pytest.raises(
        UserError,
        match=r"tags \['O', 'B-NEG', 'I-NEG', 'B-POS', 'I-POS'\], but this "
        r"run's data tags \['O', 'B-LOC', 'I-LOC'\]",
    ):
        tagger_teacher.tag_order(variants.load(model_dir, "float32"), model_dir, ["O", "B-LOC", "I-LOC"], TaggingTask())


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_the_student_is_scored_beside_its_teacher_and_predicts_entities(student, tmp_path):
    block = metrics_of(student / "student")["distillation"]
    assert block["teacher_kind"] == "model"
    assert block["validation"]["teacher"]["f1"] > 0.8 and block["validation"]["student"]["f1"] > 0.8
    assert block["validation"]["agreement"] > 0.9
    texts = tmp_path / "texts.csv"
    texts.write_text("text\nit was a good movie\n")
    result = run_cli(
        "--model-dir",
        str(student / "student" / "model"),
        "--input",
        str(texts),
        "--output",
        str(tmp_path / "out.jsonl"),
        module="trainer.predict",
    )
    assert result.returncode == 0, result.stderr
    entities = json.loads((tmp_path / "out.jsonl").read_text())["entities"]
    assert [(e["label"], e["start"]) for e in entities] == [("POS", 9)]  # "good" (movie or not)
    assert entities[0]["text"] == "it was a good movie"[9 : entities[0]["end"]]
