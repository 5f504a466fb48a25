"""`python -m trainer.predict` and training read a file the same way: one row per line of a TSV
whose texts hold quotes, one output row per input row, progress lines while it runs."""
import csv
import json
import os
import subprocess
import sys

import pytest

from conftest import labelled_rows

QUOTES = ['"{}"', '{} "so" good', 'he said "{}', "{}\"", '""{}""', "{}"]


def quoted_tweets(count, seed):
    """(text, label) rows whose texts hold `"` the way tweets do: paired, unpaired, doubled."""
    return [(QUOTES[i % len(QUOTES)].format(text), label)
            for i, (text, label) in enumerate(labelled_rows(count, seed))]


def write_tsv(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.write("tweet\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows))
    return str(path)


def run_cli(module, *args):
    env = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache")}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.fixture(scope="module")
def tsv_run(tiny_encoder_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("tsv")
    files = {name: write_tsv(root / f"{name}.tsv", quoted_tweets(count, seed))
             for name, count, seed in (("train", 90, 1), ("validation", 30, 2), ("test", 301, 3))}
    job_dir = root / "job"
    result = run_cli("trainer.task", "--encoder", tiny_encoder_dir, "--training-file", files["train"],
                     "--validation-file", files["validation"], "--job-dir", job_dir, "--epochs", "1",
                     "--batch-size", "16", "--max-seq-length", "16", "--mixed-precision", "off")
    assert result.returncode == 0, result.stdout + result.stderr
    return files, job_dir, result


def test_training_reads_every_tsv_line_as_one_row(tsv_run):
    _, job_dir, result = tsv_run
    metrics = json.loads((job_dir / "metrics.json").read_text())
    assert metrics["dataset_sizes"]["train"] == 90 and metrics["dataset_sizes"]["validation"] == 30
    assert "train classes: negative 30, neutral 30, positive 30" in result.stdout


@pytest.mark.parametrize("suffix", ["tsv", "csv", "jsonl"])
def test_predict_writes_one_row_per_tsv_line_with_the_text_unchanged(tsv_run, tmp_path, suffix):
    files, job_dir, _ = tsv_run
    output = tmp_path / f"predictions.{suffix}"
    result = run_cli("trainer.predict", "--model-dir", job_dir / "model", "--input", files["test"],
                     "--output", output, "--batch-size", "32")
    assert result.returncode == 0, result.stderr
    assert "wrote 301 rows with predictions" in result.stdout
    with open(output, encoding="utf-8", newline="") as f:
        if suffix == "jsonl":
            rows = [json.loads(line) for line in f]
        else:
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if suffix == "tsv" else csv.DictReader(f)
            rows = list(reader)
    assert [r["tweet"] for r in rows] == [text for text, _ in quoted_tweets(301, 3)]
    assert all(r["predicted_label"] in ("negative", "neutral", "positive") for r in rows)


def test_predict_logs_progress_with_rows_per_second(tsv_run, tmp_path):
    files, job_dir, _ = tsv_run
    result = run_cli("trainer.predict", "--model-dir", job_dir / "model", "--input", files["test"],
                     "--output", tmp_path / "p.csv", "--log-every-seconds", "0.000001")
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stdout.splitlines() if " predicted 301 rows (100%)" in line]
    assert len(progress) == 1 and " rows/s  ETA 0s" in progress[0]


def test_a_text_tsv_cannot_hold_is_refused_not_mangled(tsv_run, tmp_path):
    _, job_dir, _ = tsv_run
    source = tmp_path / "in.csv"
    source.write_text('tweet,label\n"two\nlines",positive\n', encoding="utf-8")
    result = run_cli("trainer.predict", "--model-dir", job_dir / "model", "--input", source,
                     "--output", tmp_path / "out.tsv")
    assert result.returncode == 2 and "holds a tab or a line break, which TSV cannot hold" in result.stderr
    assert not (tmp_path / "out.tsv").exists()


def test_a_broken_input_line_is_named(tsv_run, tmp_path):
    _, job_dir, _ = tsv_run
    source = tmp_path / "in.tsv"
    source.write_text("tweet\tlabel\nfine\tpositive\nextra\ttab\there\n", encoding="utf-8")
    result = run_cli("trainer.predict", "--model-dir", job_dir / "model", "--input", source,
                     "--output", tmp_path / "out.csv")
    assert result.returncode == 2 and "in.tsv: line 3 holds 3 fields, the header 2" in result.stderr
    assert "Traceback" not in result.stderr
