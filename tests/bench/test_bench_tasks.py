"""bench/tasks.py reads GLUE's MRPC and STS-B folders as GLUE distributes them (header names,
`"` inside tab-separated texts) and reports the paraphrase F1 and the Spearman of each run."""

import json
import os
import random
import subprocess
import sys

import pytest
from conftest import NEGATIVE, NEUTRAL, POSITIVE, ROOT

TEXTS = POSITIVE + NEGATIVE + NEUTRAL


def write_glue(folder, header, line_of, rows):
    os.makedirs(folder)
    for name, count, seed in (("train.tsv", rows, 1), ("dev.tsv", rows // 3, 2)):
        rng = random.Random(seed)
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write("\t".join(header) + "\n")
            f.writelines("\t".join(line_of(i, rng)) + "\n" for i in range(count))
    return str(folder)


def mrpc_line(i, rng):
    first, same = rng.choice(TEXTS), i % 2 == 0
    second = first if same else rng.choice([t for t in TEXTS if t != first])
    return [str(int(same)), str(1000 + i), str(2000 + i), f'he said " {first} "', second]


def stsb_line(i, rng):
    first, second = rng.choice(TEXTS), rng.choice(TEXTS)
    score = 5.0 if first == second else rng.uniform(0, 2)
    return [str(i), "main-captions", "MSRvid", "2012test", f"{i:04d}", "none", "none", first, second, f"{score:.3f}"]


@pytest.mark.slow
def test_both_benchmarks_run_from_glue_folders_and_report_their_metric(tiny_encoder_dir, tmp_path):
    mrpc = write_glue(tmp_path / "MRPC", ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], mrpc_line, 60)
    stsb = write_glue(
        tmp_path / "STS-B",
        ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2", "score"],
        stsb_line,
        60,
    )
    result = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "bench", "tasks.py"),
            "--paraphrase-dir",
            mrpc,
            "--similarity-dir",
            stsb,
            "--work-dir",
            str(tmp_path / "results"),
            "--",
            "--encoder",
            tiny_encoder_dir,
            "--max-seq-length",
            "24",
            "--batch-size",
            "8",
            "--mixed-precision",
            "off",
            "--train-word-embeddings",
            # the benchmark reads metrics.json only: the copies and the report are other tests' work
            "--export-bfloat16",
            "off",
            "--export-int8",
            "off",
            "--export-onnx",
            "off",
            "--report",
            "off",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (report,) = [p for p in os.listdir(tmp_path / "results") if p.startswith("tasks-")]
    results = json.loads((tmp_path / "results" / report).read_text())["results"]
    for task in ("paraphrase", "similarity"):
        metrics = json.loads(open(os.path.join(results[task]["job_dir"], "metrics.json")).read())
        assert metrics["dataset_sizes"]["validation"] == 20
        assert metrics["text_pair_column"] == ("#2 String" if task == "paraphrase" else "sentence2")
        assert 0 <= results[task]["score"] <= 100
    assert "paraphrase  F1 (paraphrase)" in result.stdout and "similarity  Spearman" in result.stdout


def test_a_folder_without_dev_tsv_is_refused_before_training(tmp_path):
    (tmp_path / "MRPC").mkdir()
    (tmp_path / "MRPC" / "train.tsv").write_text("Quality\t#1 String\t#2 String\n")
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "tasks.py"), "--paraphrase-dir", str(tmp_path / "MRPC")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and f"--paraphrase-dir: no dev.tsv in {tmp_path / 'MRPC'}" in result.stderr
