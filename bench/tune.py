"""Benchmark: does `python -m trainer.tune` find better flags than the defaults on a small budget?

    python bench/tune.py                    # SST-2, 2,000 training sentences, 6 trials
    python bench/tune.py --trials 8 --publish

On one real task it runs the trainer once with default flags and a search of `--trials` trials
over the same data (trainer.tune's default space), then scores the defaults and the search's best
trial on a test split neither saw: the first 2,000 sentences of sst2/dev.tsv. Each trial, and
the defaults' run, trains on the first `--rows` sentences of sst2/train.tsv and validates on the
next 1,000 of dev.tsv: the search maximizes their macro-F1 (a validation split a tenth of 2,000
rows picks flags that do not carry over to the test split).
"""

import argparse
import csv
import json
import os
import subprocess
import sys

from common import WORK, add_publish_flag, finish, machine, printed, publish, table
from recipe import DATA, DATASETS, read_csv, write_csv

SST2 = DATASETS["sst2"]


def prepare(data_dir: str, out: str, rows: int) -> list:
    """Trainer flags for the training and test files, written under `out`."""
    os.makedirs(out, exist_ok=True)
    sentences = read_csv(os.path.join(data_dir, "sst2", "train.tsv"), "\t")
    dev = read_csv(os.path.join(data_dir, "sst2", "dev.tsv"), "\t")
    train, validation, test = (
        os.path.join(out, name) for name in (f"sst2-{rows}.csv", "sst2-validation.csv", "sst2-test.csv")
    )
    write_csv(train, sentences[0], sentences[1 : rows + 1])
    write_csv(test, dev[0], dev[1:2_001])
    write_csv(validation, dev[0], dev[2_001:3_001])
    return [
        f"--training-file={train}",
        f"--validation-file={validation}",
        f"--testing-file={test}",
        *SST2["flags"],
        "--export-bfloat16",
        "off",
        "--export-int8",
        "off",
    ]


def run(command: list, log_path: str) -> None:
    with open(log_path, "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:3])} exited {done.returncode}; see {log_path}")


def scores(job_dir: str) -> dict:
    with open(os.path.join(job_dir, "metrics.json")) as f:
        metrics = json.load(f)
    return {
        "val_macro_f1": 100 * metrics["validation"]["macro_f1"],
        "test_accuracy": 100 * SST2["score"](metrics["test"]),
        "flags": {
            name: metrics["hyperparameters"][name]
            for name in ("learning_rate", "batch_size", "warmup_fraction", "weight_decay", "layer_decay", "epochs")
        }
        | {"dropout": metrics["hyperparameters"]["dropout"]},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--rows", type=int, default=2_000, help="training sentences")
    parser.add_argument("--data-dir", default=DATA)
    parser.add_argument("--work-dir", default=os.path.join(WORK, "tune"))
    add_publish_flag(parser)
    args = parser.parse_args()
    flags = prepare(args.data_dir, os.path.join(args.work_dir, "data"), args.rows)
    defaults_dir, search_dir = (os.path.join(args.work_dir, name) for name in ("defaults", "search"))
    if not os.path.exists(os.path.join(defaults_dir, "metrics.json")):
        run([sys.executable, "-m", "trainer.task", "--job-dir", defaults_dir, *flags], defaults_dir + ".log")
    run(
        [
            sys.executable,
            "-m",
            "trainer.tune",
            "--job-dir",
            search_dir,
            "--max-trial-count",
            str(args.trials),
            "--",
            *flags,
        ],
        search_dir + ".log",
    )
    with open(os.path.join(search_dir, "trials.csv"), newline="") as f:
        trials = [row for row in csv.DictReader(f) if row["state"] == "finished"]
    best = max(trials, key=lambda row: float(row["val_macro_f1"]))
    results = {
        "defaults": scores(defaults_dir),
        f"best of {len(trials)} trials (trial {best['trial']})": scores(
            os.path.join(search_dir, "trials", best["trial"])
        ),
    }
    rows = [
        [
            name,
            f"{r['val_macro_f1']:.1f}",
            f"{r['test_accuracy']:.1f}",
            ", ".join(f"{k} {v}" for k, v in r["flags"].items()),
        ]
        for name, r in results.items()
    ]
    with printed() as text:
        print(
            f"\nSST-2, {args.rows} training sentences; validation: 1,000 and test: 2,000 other "
            "sentences of sst2/dev.tsv"
        )
        print(table(rows, ["flags", "val macro-F1", "test accuracy", "values"]))
    result = {"machine": machine(), "trials": args.trials, "rows": args.rows, "results": results}
    finish(result, os.path.join(args.work_dir, "tune.json"))
    if args.publish:
        print(f"wrote {publish('tune', result, text.getvalue())}")


if __name__ == "__main__":
    main()
