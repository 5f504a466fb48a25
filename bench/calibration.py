"""Calibration on TweetEval: what the fitted temperature does to a fine-tuned model's confidence.

    python bench/calibration.py                  # defaults, 3 epochs
    python bench/calibration.py --epochs 1

One real `python -m trainer.task` run with default flags: train on the first 10,000 lines of
TweetEval's test_*, validate on val_*, test on the other 2,284 lines of test_* (the seed's
benchmark splits, ../shared/bench/prepare_data.py). It prints metrics.json's calibration block:
expected calibration error, Brier score and log loss before and after temperature scaling, on the
test split (which the temperature never saw) and on validation (which it was fitted on). The table
and the JSON go to bench/results/ (bench/common.py: publish). Needs ../shared/data/tweeteval.
"""
import argparse
import json
import os
import sys

from common import WORK, machine, printed, publish
from run import LABELS, log, prepare_data, run_measured

ROWS = [("test ECE", "test", "ece", ".4f"), ("test Brier", "test", "brier", ".4f"),
        ("test log loss", "test", "nll", ".3f"), ("validation ECE", "validation", "ece", ".4f")]


def train(data: dict, epochs: int, work: str) -> dict:
    job_dir = os.path.join(work, "jobs", f"calibration-{epochs}")
    command = [sys.executable, "-m", "trainer.task", "--training-file", data["train"],
               "--validation-file", data["eval"], "--testing-file", data["holdout"],
               "--text-column", "text", "--label-column", "label", "--label-type", "index",
               "--label-names", LABELS, "--epochs", str(epochs), "--job-dir", job_dir, "--overwrite",
               "--log-every-seconds", "60"]
    log(f"training {epochs} epoch(s) with default flags (log: {job_dir}.log)")
    run_measured(command, f"{job_dir}.log")
    with open(os.path.join(job_dir, "metrics.json"), encoding="utf-8") as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--work-dir", default=WORK, help="scratch: data, job dir, log")
    args = parser.parse_args()
    work = os.path.abspath(args.work_dir)
    os.makedirs(os.path.join(work, "jobs"), exist_ok=True)
    data = prepare_data(work)
    if "holdout" not in data:
        parser.error("needs TweetEval in ../shared/data/tweeteval (the sample posts have no test split)")
    metrics = train(data, args.epochs, work)
    block = metrics["calibration"]
    with printed() as text:
        print(f"\nbench/calibration.py: defaults, {args.epochs} epoch(s); best epoch {metrics['best_epoch']}; "
              f"test accuracy {metrics['test']['accuracy']:.3f}, macro-recall {metrics['test']['macro_recall']:.3f}; "
              f"temperature {block['temperature']:.3f}")
        print(f"{'':16s}{'before':>8s}{'after':>8s}")
        for name, split, score, spec in ROWS:
            print(f"{name:16s}{block[split][score + '_before']:>8{spec}}{block[split][score + '_after']:>8{spec}}")
    publish("calibration", {"machine": machine(), "epochs": args.epochs, "best_epoch": metrics["best_epoch"],
                            "test": metrics["test"], "calibration": block}, text.getvalue())


if __name__ == "__main__":
    main()
