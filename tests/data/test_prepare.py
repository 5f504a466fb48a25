"""`python -m trainer.prepare` splits every kind of file the trainer reads (issue #23, 9): single
texts, sentence pairs (GLUE MRPC's columns), regression scores (STS-B) stratified on score bins,
multi-label files, tagged sentences (issue 64, 6) and embeddings' pairs and labelled texts; in process, on
small generated files."""

import json
import random

import numpy as np
import pytest
from conftest import read_csv

from trainer import cli
from trainer.data import preparation

SEED_SPLIT = ["--eval-fraction", "0.2", "--test-fraction", "0.2"]


def write_tsv(path, header, rows):
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def run(capsys, *argv):
    code = cli.run(preparation.main, [*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def mrpc_like(path, count=60):
    """GLUE MRPC's layout: Quality, #1 ID, #2 ID, #1 String, #2 String."""
    rows = [(i % 2, 100 + i, 200 + i, f"first sentence {i}", f"second sentence {i}") for i in range(count)]
    return write_tsv(path, ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], rows)


def test_sentence_pairs_are_split_with_both_texts_and_stratified_by_class(tmp_path, capsys):
    source = mrpc_like(tmp_path / "msr_paraphrase_train.tsv")
    code, out, err = run(
        capsys,
        "--input",
        source,
        "--output-dir",
        tmp_path / "out",
        "--text-column",
        "#1 String",
        "--text-pair-column",
        "#2 String",
        "--label-column",
        "Quality",
        *SEED_SPLIT,
    )
    assert code == 0, err
    splits = {name: read_csv(tmp_path / "out" / f"{name}.csv") for name in ("train", "eval", "test")}
    assert [len(rows) for rows in splits.values()] == [36, 12, 12]
    assert all(sum(r["Quality"] == "1" for r in rows) * 2 == len(rows) for rows in splits.values())
    assert {r["#2 String"] for rows in splits.values() for r in rows} == {f"second sentence {i}" for i in range(60)}


def test_a_pair_column_that_does_not_exist_is_named(tmp_path, capsys):
    source = mrpc_like(tmp_path / "pairs.tsv")
    code, _, err = run(
        capsys,
        "--input",
        source,
        "--output-dir",
        tmp_path / "out",
        "--text-column",
        "#1 String",
        "--text-pair-column",
        "#3 String",
        "--label-column",
        "Quality",
    )
    assert code == 2 and err.startswith("error: --text-pair-column: column '#3 String' is not in")


def test_regression_scores_are_split_stratified_on_score_bins(tmp_path, capsys):
    """STS-B's layout (sentence1, sentence2, score in [0, 5]): every split spans the scores."""
    rng = random.Random(0)
    rows = [(f"a {i}", f"b {i}", round(rng.uniform(0, 5), 2)) for i in range(200)]
    source = write_tsv(tmp_path / "sts.tsv", ["sentence1", "sentence2", "score"], rows)
    code, out, err = run(
        capsys, "--input", source, "--output-dir", tmp_path / "out", "--task", "regression", *SEED_SPLIT
    )
    assert code == 0, err
    scores = {
        name: np.array([float(r["score"]) for r in read_csv(tmp_path / "out" / f"{name}.csv")])
        for name in ("train", "eval", "test")
    }
    assert [len(s) for s in scores.values()] == [120, 40, 40]
    deciles = np.quantile(np.concatenate(list(scores.values())), np.linspace(0, 1, 11)[1:-1])
    for split in ("eval", "test"):  # stratified: 4 of 40 rows in each tenth of the scores
        assert np.bincount(np.searchsorted(deciles, scores[split], side="right"), minlength=10).tolist() == [4] * 10
    assert "eval.csv      40 rows: score mean" in out


def test_scores_outside_minus_1_to_1_suggest_regression(tmp_path, capsys):
    source = write_tsv(
        tmp_path / "sts.tsv",
        ["sentence1", "sentence2", "label"],
        [(f"a {i}", f"b {i}", i % 6) for i in range(30)] + [("a", "b", 4.5)],
    )
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out")
    assert code == 2 and "pass --task regression" in err


def test_multi_label_files_are_split_with_every_label_in_every_split(tmp_path, capsys):
    cells = ["sports"] * 30 + ["politics"] * 30 + ["sports|politics"] * 10 + ["science"] * 10 + [""] * 20
    source = write_tsv(
        tmp_path / "topics.tsv", ["text", "topics"], [(f"text {i}", cell) for i, cell in enumerate(cells)]
    )
    code, out, err = run(
        capsys,
        "--input",
        source,
        "--output-dir",
        tmp_path / "out",
        "--task",
        "multi-label",
        "--label-column",
        "topics",
        *SEED_SPLIT,
    )
    assert code == 0, err
    for name in ("eval", "test"):
        rows = read_csv(tmp_path / "out" / f"{name}.csv")
        assert sum("science" in r["topics"] for r in rows) == 2  # the rarest label, 10 rows: a fifth
        assert sum(r["topics"] == "" for r in rows) == 4
    assert "science" in out and "politics" in out


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--label-columns", "a,b"], "--label-columns: needs --task multi-label"),
        (["--task", "regression", "--label-names", "a,b"], "--label-names: has no meaning with --task regression"),
    ],
)
def test_the_trainers_flag_checks_apply(tmp_path, capsys, flags, message):
    source = write_tsv(tmp_path / "t.tsv", ["text", "label"], [("x", 1)] * 10)
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", *flags)
    assert code == 2 and message in err


def test_repeated_pairs_stay_in_one_split(tmp_path, capsys):
    """Issue 37, 9: on a file that holds every pair twice, 12 of 12 test pairs were also in train."""
    rows = [(i % 2, 100 + i, 200 + i, f"first sentence {i}", f"second sentence {i}") for i in range(30)]
    source = write_tsv(tmp_path / "pairs.tsv", ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], rows + rows)
    code, out, err = run(
        capsys,
        "--input",
        source,
        "--output-dir",
        tmp_path / "out",
        "--text-column",
        "#1 String",
        "--text-pair-column",
        "#2 String",
        "--label-column",
        "Quality",
        *SEED_SPLIT,
    )
    assert code == 0, err
    pairs = {
        name: {(r["#1 String"], r["#2 String"]) for r in read_csv(tmp_path / "out" / f"{name}.csv")}
        for name in ("train", "eval", "test")
    }
    assert not pairs["train"] & pairs["test"] and not pairs["train"] & pairs["eval"]
    assert not pairs["eval"] & pairs["test"]
    assert len(read_csv(tmp_path / "out" / "test.csv")) == 12
    assert "30 rows repeat the text of an earlier row: each is in the split of that row" in out


def test_labels_that_differ_only_in_case_are_refused_as_the_trainer_refuses_them(tmp_path, capsys):
    source = write_tsv(
        tmp_path / "t.tsv", ["text", "label"], [(f"text {i}", ["pos", "Pos", "neg"][i % 3]) for i in range(30)]
    )
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out")
    assert code == 2 and "labels 'Pos' (10 rows, first on line 3) and 'pos' (10 rows" in err
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", "--allow-label-variants")
    assert code == 0, err


def test_a_semicolon_csv_is_split_with_delimiter(tmp_path, capsys):
    source = tmp_path / "t.csv"
    source.write_text("text;label\n" + "".join(f"text {i}, more;{'ab'[i % 2]}\n" for i in range(40)))
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out")
    assert code == 2 and "separated by semicolons" in err and "--delimiter ';'" in err
    code, out, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", "--delimiter", ";", *SEED_SPLIT)
    assert code == 0, err
    assert read_csv(tmp_path / "out" / "eval.csv")[0]["text"].endswith(", more")


# --------------------------------------------------------------------------- tagged sentences (issue 64, 6)


def conll_sentences(count=60):
    """CoNLL-2003's four columns: PER in every sentence, LOC in every third, one sentence in
    five a repeat of the one before."""
    blocks = []
    for i in range(count):
        n = i - 1 if i % 5 == 4 else i
        lines = [f"Ann{n} NNP B-NP B-PER", f"met{n} VBD B-VP O"]
        if n % 3 == 0:
            lines.append(f"Oslo{n} NNP B-NP B-LOC")
        blocks.append("\n".join(lines) + "\n")
    return "-DOCSTART- -X- -X- O\n\n" + "\n".join(blocks)


def sentences_of(path):
    return [block.strip("\n") for block in path.read_text(encoding="utf-8").split("\n\n") if block.strip()]


def test_help_names_the_tagging_task_and_its_files():
    text = " ".join(preparation.build_arg_parser().format_help().split())
    assert "'token-classification' (tagged sentences;" in text
    assert "'auto': token-classification for tagged sentences, else classification" in text
    assert "e.g. train.conll" in text


def test_a_conll_file_is_split_into_conll_files_keeping_every_column(tmp_path, capsys):
    source = tmp_path / "ner.conll"
    source.write_text(conll_sentences(), encoding="utf-8")
    code, out, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", *SEED_SPLIT)
    assert code == 0, err
    splits = {name: sentences_of(tmp_path / "out" / f"{name}.conll") for name in ("train", "eval", "test")}
    given = sentences_of(source)[1:]  # after -DOCSTART-
    assert sorted(s for split in splits.values() for s in split) == sorted(given)
    assert all(line.count(" ") == 3 for split in splits.values() for s in split for line in s.splitlines())
    assert "eval.conll     11 sentences: entities LOC 3, PER 11" in out  # LOC stratified: 16 of 48


def test_identical_sentences_stay_in_one_split(tmp_path, capsys):
    source = tmp_path / "ner.conll"
    source.write_text(conll_sentences(), encoding="utf-8")
    code, out, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", *SEED_SPLIT)
    assert code == 0, err
    sets = [set(sentences_of(tmp_path / "out" / f"{name}.conll")) for name in ("train", "eval", "test")]
    assert not sets[0] & sets[1] and not sets[0] & sets[2] and not sets[1] & sets[2]
    assert "12 sentences repeat the text of an earlier sentence" in out


def test_tagged_splits_are_seeded(tmp_path, capsys):
    source = tmp_path / "ner.conll"
    source.write_text(conll_sentences(), encoding="utf-8")
    written = []
    for seed, out in (("1", "a"), ("1", "b"), ("2", "c")):
        code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / out, "--seed", seed, *SEED_SPLIT)
        assert code == 0, err
        written.append((tmp_path / out / "test.conll").read_text())
    assert written[0] == written[1] != written[2]


def test_json_lines_of_spans_are_split_record_for_record(tmp_path, capsys):
    records = [
        {
            "id": i,
            "text": f"Ada {i} lives in Oslo",
            "spans": [{"start": 0, "end": 3, "label": "PER"}]
            + (
                [{"start": len(f"Ada {i} lives in "), "end": len(f"Ada {i} lives in Oslo"), "label": "LOC"}]
                if i % 4 == 0
                else []
            ),
        }
        for i in range(40)
    ]
    source = tmp_path / "ner.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out", *SEED_SPLIT)
    assert code == 0, err
    written = [
        json.loads(line)
        for name in ("train", "eval", "test")
        for line in (tmp_path / "out" / f"{name}.jsonl").read_text().splitlines()
    ]
    assert sorted(written, key=lambda r: r["id"]) == records


def test_a_txt_of_conll_lines_is_split_with_the_tagging_task(tmp_path, capsys):
    source = tmp_path / "wnut.txt"
    source.write_text(conll_sentences().replace(" NNP B-NP", "").replace(" VBD B-VP", ""), encoding="utf-8")
    code, _, err = run(capsys, "--input", source, "--output-dir", tmp_path / "out")
    assert code == 2 and "--task token-classification" in err
    code, _, err = run(
        capsys, "--input", source, "--output-dir", tmp_path / "out", "--task", "token-classification", *SEED_SPLIT
    )
    assert code == 0, err
    assert set(sentences_of(tmp_path / "out" / "eval.txt")) <= set(sentences_of(source))


def test_tagged_files_of_two_formats_are_refused(tmp_path, capsys):
    (tmp_path / "a.conll").write_text("Ada\tB-PER\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"tokens": ["Bo"], "tags": ["B-PER"]}\n', encoding="utf-8")
    code, _, err = run(
        capsys, "--input", f"{tmp_path / 'a.conll'},{tmp_path / 'b.jsonl'}", "--output-dir", tmp_path / "out"
    )
    assert code == 2 and "mixes CoNLL and JSON Lines files" in err


def test_pairs_without_a_score_are_split_for_embeddings_in_one_stratum(tmp_path, capsys):
    rows = [(f"first text {i}", f"second text {i}") for i in range(40)]
    source = write_tsv(tmp_path / "pairs.tsv", ["sentence1", "sentence2"], rows)
    code, out, err = run(
        capsys, "--input", source, "--output-dir", tmp_path / "out", "--task", "embedding", *SEED_SPLIT
    )
    assert code == 0, err
    splits = {name: read_csv(tmp_path / "out" / f"{name}.csv") for name in ("train", "eval", "test")}
    assert sum(len(split) for split in splits.values()) == 40 and all(len(s) >= 7 for s in splits.values())
    assert list(splits["eval"][0]) == ["sentence1", "sentence2"]
    assert "distinct first texts" in out


def test_labelled_texts_are_split_for_embeddings_stratified_by_class(tmp_path, capsys):
    rows = [(f"text number {i}", "ab"[i % 2]) for i in range(40)]
    source = write_tsv(tmp_path / "texts.tsv", ["text", "label"], rows)
    code, out, err = run(
        capsys, "--input", source, "--output-dir", tmp_path / "out", "--task", "embedding", *SEED_SPLIT
    )
    assert code == 0, err
    held = read_csv(tmp_path / "out" / "eval.csv")
    assert sorted(r["label"] for r in held) == ["a"] * 4 + ["b"] * 4
