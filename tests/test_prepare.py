"""`python -m trainer.prepare` splits every kind of file the trainer reads (issue #23, 9): single
texts, sentence pairs (GLUE MRPC's columns), regression scores (STS-B) stratified on score bins,
and multi-label files; in process, on small generated files."""
import random

import numpy as np
import pytest

from conftest import read_csv
from trainer import cli
from trainer.data import prepare

SEED_SPLIT = ["--eval-fraction", "0.2", "--test-fraction", "0.2"]


def write_tsv(path, header, rows):
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows),
                    encoding="utf-8")
    return str(path)


def run(capsys, *argv):
    code = cli.run(prepare.main, [*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def mrpc_like(path, count=60):
    """GLUE MRPC's layout: Quality, #1 ID, #2 ID, #1 String, #2 String."""
    rows = [(i % 2, 100 + i, 200 + i, f"first sentence {i}", f"second sentence {i}") for i in range(count)]
    return write_tsv(path, ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], rows)


def test_sentence_pairs_are_split_with_both_texts_and_stratified_by_class(tmp_path, capsys):
    source = mrpc_like(tmp_path / "msr_paraphrase_train.tsv")
    code, out, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", "--text-column",
                         "#1 String", "--text-pair-column", "#2 String", "--label-column", "Quality",
                         *SEED_SPLIT)
    assert code == 0, err
    splits = {name: read_csv(tmp_path / "out" / f"{name}.csv") for name in ("train", "eval", "test")}
    assert [len(rows) for rows in splits.values()] == [36, 12, 12]
    assert all(sum(r["Quality"] == "1" for r in rows) * 2 == len(rows) for rows in splits.values())
    assert {r["#2 String"] for rows in splits.values() for r in rows} == {f"second sentence {i}" for i in range(60)}


def test_a_pair_column_that_does_not_exist_is_named(tmp_path, capsys):
    source = mrpc_like(tmp_path / "pairs.tsv")
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", "--text-column",
                       "#1 String", "--text-pair-column", "#3 String", "--label-column", "Quality")
    assert code == 2 and err.startswith("error: --text-pair-column: column '#3 String' is not in")


def test_regression_scores_are_split_stratified_on_score_bins(tmp_path, capsys):
    """STS-B's layout (sentence1, sentence2, score in [0, 5]): every split spans the scores."""
    rng = random.Random(0)
    rows = [(f"a {i}", f"b {i}", round(rng.uniform(0, 5), 2)) for i in range(200)]
    source = write_tsv(tmp_path / "sts.tsv", ["sentence1", "sentence2", "score"], rows)
    code, out, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out",
                         "--task", "regression", *SEED_SPLIT)
    assert code == 0, err
    scores = {name: np.array([float(r["score"]) for r in read_csv(tmp_path / "out" / f"{name}.csv")])
              for name in ("train", "eval", "test")}
    assert [len(s) for s in scores.values()] == [120, 40, 40]
    deciles = np.quantile(np.concatenate(list(scores.values())), np.linspace(0, 1, 11)[1:-1])
    for split in ("eval", "test"):  # stratified: 4 of 40 rows in each tenth of the scores
        assert np.bincount(np.searchsorted(deciles, scores[split], side="right"),
                           minlength=10).tolist() == [4] * 10
    assert "eval.csv      40 rows: score mean" in out


def test_scores_outside_minus_1_to_1_suggest_regression(tmp_path, capsys):
    source = write_tsv(tmp_path / "sts.tsv", ["sentence1", "sentence2", "label"],
                       [(f"a {i}", f"b {i}", i % 6) for i in range(30)] + [("a", "b", 4.5)])
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out")
    assert code == 2 and "pass --task regression" in err


def test_multi_label_files_are_split_with_every_label_in_every_split(tmp_path, capsys):
    cells = ["sports"] * 30 + ["politics"] * 30 + ["sports|politics"] * 10 + ["science"] * 10 + [""] * 20
    source = write_tsv(tmp_path / "topics.tsv", ["text", "topics"],
                       [(f"text {i}", cell) for i, cell in enumerate(cells)])
    code, out, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", "--task", "multi-label",
                         "--label-column", "topics", *SEED_SPLIT)
    assert code == 0, err
    for name in ("eval", "test"):
        rows = read_csv(tmp_path / "out" / f"{name}.csv")
        assert sum("science" in r["topics"] for r in rows) == 2  # the rarest label, 10 rows: a fifth
        assert sum(r["topics"] == "" for r in rows) == 4
    assert "science" in out and "politics" in out


@pytest.mark.parametrize("flags, message", [
    (["--label-columns", "a,b"], "--label-columns: needs --task multi-label"),
    (["--task", "regression", "--label-names", "a,b"], "--label-names: has no meaning with --task regression"),
])
def test_the_trainers_flag_checks_apply(tmp_path, capsys, flags, message):
    source = write_tsv(tmp_path / "t.tsv", ["text", "label"], [("x", 1)] * 10)
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", *flags)
    assert code == 2 and message in err


def test_repeated_pairs_stay_in_one_split(tmp_path, capsys):
    """Issue 37, 9: on a file that holds every pair twice, 12 of 12 test pairs were also in train."""
    rows = [(i % 2, 100 + i, 200 + i, f"first sentence {i}", f"second sentence {i}") for i in range(30)]
    source = write_tsv(tmp_path / "pairs.tsv", ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                       rows + rows)
    code, out, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", "--text-column",
                         "#1 String", "--text-pair-column", "#2 String", "--label-column", "Quality",
                         *SEED_SPLIT)
    assert code == 0, err
    pairs = {name: {(r["#1 String"], r["#2 String"]) for r in read_csv(tmp_path / "out" / f"{name}.csv")}
             for name in ("train", "eval", "test")}
    assert not pairs["train"] & pairs["test"] and not pairs["train"] & pairs["eval"]
    assert not pairs["eval"] & pairs["test"]
    assert len(read_csv(tmp_path / "out" / "test.csv")) == 12
    assert "30 rows repeat the text of an earlier row: each is in the split of that row" in out


def test_labels_that_differ_only_in_case_are_refused_as_the_trainer_refuses_them(tmp_path, capsys):
    source = write_tsv(tmp_path / "t.tsv", ["text", "label"],
                       [(f"text {i}", ["pos", "Pos", "neg"][i % 3]) for i in range(30)])
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out")
    assert code == 2 and "labels 'Pos' (10 rows, first on line 3) and 'pos' (10 rows" in err
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out",
                       "--allow-label-variants")
    assert code == 0, err


def test_a_semicolon_csv_is_split_with_delimiter(tmp_path, capsys):
    source = tmp_path / "t.csv"
    source.write_text("text;label\n" + "".join(f"text {i}, more;{'ab'[i % 2]}\n" for i in range(40)))
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out")
    assert code == 2 and "separated by semicolons" in err and "--delimiter ';'" in err
    code, out, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out",
                         "--delimiter", ";", *SEED_SPLIT)
    assert code == 0, err
    assert read_csv(tmp_path / "out" / "eval.csv")[0]["text"].endswith(", more")
