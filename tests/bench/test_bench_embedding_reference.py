"""bench/embedding_reference.py, the sentence-transformers run bench/embedding.py will compare the
trainer's embeddings with: its result records what it measured, its Spearman is that of the
model it trained, and its split holds no validation sentence in a training pair."""

import csv
import json
import os
import sys

import numpy as np
import pytest
from conftest import ROOT

from trainer import cli

sys.path.insert(0, os.path.join(ROOT, "bench"))
import embedding_reference  # noqa: E402

pytest.importorskip("sentence_transformers")
pytest.importorskip("datasets")

# Pairs of the tiny BERT's words, linked by shared sentences as STS-B's are: a plain split of
# these pairs holds out sentences that training pairs also hold.
PAIRS = [
    ("i love this movie", "the movie is great", "4.0"),
    ("i love this movie", "i hate this movie", "0.5"),
    ("i hate this movie", "the movie is awful", "4.2"),
    ("it was very good", "it was so bad", "0.8"),
    ("it was so bad", "it is not good", "3.6"),
    ("this movie is fine", "this movie is ok", "4.8"),
    ("it is not bad", "this movie is ok", "3.0"),
    ("a great movie !", "a bad movie .", "1.0"),
    ("the movie was meh", "this movie is fine", "2.5"),
    ("i love it", "i hate it", "0.2"),
    ("i love it", "very very good", "3.3"),
    ("the movie is great", "a great movie !", "4.4"),
    ("so good", "very good !", "4.1"),
    ("awful", "so bad", "3.9"),
    ("the movie", "a movie ?", "3.5"),
    ("ok", "fine", "4.0"),
]


def write_pairs(path, pairs) -> str:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("sentence1", "sentence2", "score"), *pairs])
    return str(path)


def read_pairs(path) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return [tuple(row.values()) for row in csv.DictReader(f)]


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_encoder_dir):
    """One epoch on the tiny BERT: (result, the trained model's directory, the split's folder)."""
    tmp = tmp_path_factory.mktemp("embedding_reference")
    flags = [
        *("--encoder", tiny_encoder_dir, "--train", write_pairs(tmp / "pairs.csv", PAIRS)),
        *("--validation-fraction", "0.3", "--seed", "0", "--epochs", "1", "--batch-size", "4"),
        *("--max-length", "16", "--learning-rate", "1e-3", "--split-dir", str(tmp / "split")),
        *("--output", str(tmp / "result.json"), "--model-output", str(tmp / "model")),
    ]
    embedding_reference.main(flags)
    with open(tmp / "result.json") as f:
        return json.load(f), tmp / "model", flags


def cosines(model_dir, first, second) -> np.ndarray:
    """Cosine of each pair's mean-pooled vectors, by transformers alone (not the library's encode)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()

    def vectors(texts):
        pieces = tokenizer(texts, padding=True, truncation=True, max_length=16, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**pieces).last_hidden_state
        mask = pieces["attention_mask"].unsqueeze(-1).float()
        return ((hidden * mask).sum(1) / mask.sum(1)).numpy().astype(np.float64)

    a, b = vectors(first), vectors(second)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_the_result_records_scores_seconds_split_machine_and_versions(run):
    result, _, _ = run
    trained_scores = [float(score) for _, _, score in read_pairs(result["train_file"])]
    assert [h["epoch"] for h in result["history"]] == [1]
    assert result["spearman"] == result["history"][-1]["spearman"]
    assert -1 <= result["zero_shot_spearman"] <= 1 and result["zero_shot_spearman"] != result["spearman"]
    assert 0 < result["train_seconds"] == result["history"][0]["seconds"]
    assert result["split"]["pairs"] == len(PAIRS) == result["train_pairs"] + result["validation_pairs"]
    assert result["model"].startswith("no modules.json")  # the tiny BERT is a plain checkpoint
    assert result["max_seq_length"] == 16 and result["score_scale"] == max(trained_scores)
    assert result["precision"] == "float32"
    assert set(result["machine"]) == {"cpu", "cpus", "native"}
    assert all(result[k] for k in ("torch", "transformers", "sentence_transformers"))


def test_the_spearman_it_records_is_that_of_the_cosines_of_the_model_it_trained(run):
    from scipy import stats

    result, model_dir, _ = run
    held = read_pairs(result["validation_file"])
    first, second, scores = zip(*held)
    found = cosines(str(model_dir), list(first), list(second))
    expected = stats.spearmanr([float(s) for s in scores], found).statistic
    assert result["spearman"] == pytest.approx(expected, abs=1e-9)


def test_the_split_holds_out_whole_groups_no_validation_sentence_in_training_and_drops_none(run):
    result, _, _ = run
    train, held = read_pairs(result["train_file"]), read_pairs(result["validation_file"])
    assert sorted(train + held) == sorted(PAIRS)
    held_sentences = {s for a, b, _ in held for s in (a, b)}
    assert not held_sentences & {s for a, b, _ in train for s in (a, b)}
    assert result["split"]["dropped_pairs"] == 0 and result["validation_sentences_in_training_pairs"] == 0
    assert result["split"]["validation_pairs_sharing_a_sentence_in_a_plain_split"] > 0  # what it prevents


def test_sentences_differing_only_in_case_and_punctuation_are_one_sentence_to_the_split(tmp_path, tiny_encoder_dir):
    pairs = [("I love it!", "so good", "4.0"), ("i love it", "so bad", "1.0"), ("ok", "fine", "4.0")]
    args = embedding_reference.arguments(
        [
            "--encoder",
            tiny_encoder_dir,
            "--train",
            write_pairs(tmp_path / "p.csv", pairs),
            "--output",
            str(tmp_path / "r.json"),
        ]
    )
    grouped = embedding_reference.groups(embedding_reference.Pairs(args.train, "--train", args))
    assert grouped[0] == grouped[1] != grouped[2]


def test_an_encoder_directory_without_a_checkpoint_is_refused_before_anything_is_split(tmp_path, capsys):
    argv = ["--encoder", str(tmp_path), "--train", write_pairs(tmp_path / "p.csv", PAIRS)]
    argv += ["--output", str(tmp_path / "r.json"), "--split-dir", str(tmp_path / "split")]
    assert cli.run(embedding_reference.main, argv) == 2
    assert capsys.readouterr().err.startswith(f"error: --encoder: {tmp_path} holds no config.json")
    assert not (tmp_path / "split").exists()


def test_a_rerun_with_the_same_seed_splits_and_trains_alike(run, tmp_path):
    result, _, flags = run
    output = str(tmp_path / "again.json")
    embedding_reference.main([*flags[: flags.index("--output")], "--output", output])
    with open(output) as f:
        again = json.load(f)
    assert (again["train_file"], again["validation_file"]) == (result["train_file"], result["validation_file"])
    assert [(h["loss"], h["spearman"]) for h in again["history"]] == [
        (h["loss"], h["spearman"]) for h in result["history"]
    ]


def test_a_score_that_is_not_a_number_is_one_error_naming_its_line(tmp_path, capsys, tiny_encoder_dir):
    pairs = [*PAIRS[:3], ("i love it", "so good", "high")]
    argv = [
        "--encoder",
        tiny_encoder_dir,
        "--train",
        write_pairs(tmp_path / "p.csv", pairs),
        "--output",
        str(tmp_path / "r.json"),
    ]
    assert cli.run(embedding_reference.main, argv + ["--split-dir", str(tmp_path / "split")]) == 2
    assert (
        capsys.readouterr().err
        == f"error: {tmp_path / 'p.csv'} line 5, column 'score': 'high' is not a similarity score (a number)\n"
    )
