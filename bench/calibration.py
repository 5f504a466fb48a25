"""Calibration: what a fitted temperature does to a model's confidence, and whether runs keep it.

    python bench/calibration.py                            # TweetEval, defaults, 3 epochs
    python bench/calibration.py --epochs 1
    python bench/calibration.py --data mrpc --train-rows 1000 --epochs 2

One real `python -m trainer.task` run with default flags, on
- tweeteval: train on the first 10,000 lines of TweetEval's test_* (--train-rows: fewer),
  validate on val_*, test on the other 2,284 lines of test_* (the seed's benchmark splits,
  ../shared/bench/prepare_data.py);
- mrpc: GLUE MRPC sentence pairs: train on mrpc_train.csv (2,576 pairs; --train-rows: its first
  N), validate on the first 750 pairs of mrpc_dev.csv, test on its other 750.
It prints metrics.json's calibration block: expected calibration error, Brier score and log loss
before and after temperature scaling, on the test split (which the temperature never saw) and on
validation (which it was fitted on); then the run's decision (trainer.reporting.calibration.decide:
T is kept only when it lowers both the validation log loss and ECE) and the test ECE of the model
exported under it, next to the test ECE had T been applied regardless.

One run is one decision. So the rule is also measured on the exported model's own outputs for
the validation and test rows pooled (trainer.predict; logits recovered from its probabilities):
--resplits times, 100, 250 or half of them are drawn as validation, which fits T and decides as a
run does, and the others score it as test. It prints how often T was kept and the mean test ECE
under the rule, under the rule before it (T applied unless at its search bound) and with T = 1.
The tables and the JSON go to bench/results/ (bench/common.py: publish). Needs
../shared/data/tweeteval or ../shared/data/glue.
"""

import argparse
import csv
import json
import os
import sys

import numpy as np
from common import WORK, log, machine, predict_file, printed, publish, table
from run import LABELS, SHARED, head_csv, prepare_data, run_measured

ROWS = [
    ("test ECE", "test", "ece", ".4f"),
    ("test Brier", "test", "brier", ".4f"),
    ("test log loss", "test", "nll", ".3f"),
    ("validation ECE", "validation", "ece", ".4f"),
    ("validation log loss", "validation", "nll", ".3f"),
]
MRPC_VALIDATION_ROWS = 750  # of mrpc_dev.csv's 1,500: the rest is the test split


def tweeteval(work: str, train_rows: int) -> tuple:
    """(files, flags) of the TweetEval splits, the training file cut to `train_rows`."""
    data = prepare_data(work)
    if "holdout" not in data:
        sys.exit("error: needs TweetEval in ../shared/data/tweeteval (the sample posts have no test split)")
    train = head_csv(data["train"], train_rows, os.path.join(work, "data", f"tweeteval_train_{train_rows}.csv"))
    return (
        {"train": train, "validation": data["eval"], "test": data["holdout"]},
        ["--text-column", "text", "--label-column", "label", "--label-type", "index", "--label-names", LABELS],
    )


def mrpc(work: str, train_rows: int) -> tuple:
    """(files, flags) of MRPC: mrpc_dev.csv halved into validation and test."""
    glue = os.path.join(SHARED, "data", "glue")
    if not os.path.isfile(os.path.join(glue, "mrpc_dev.csv")):
        sys.exit("error: needs GLUE MRPC in ../shared/data/glue (mrpc_train.csv, mrpc_dev.csv)")
    out = os.path.join(work, "data")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(glue, "mrpc_dev.csv"), newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    files = {
        "train": head_csv(
            os.path.join(glue, "mrpc_train.csv"), train_rows, os.path.join(out, f"mrpc_train_{train_rows}.csv")
        )
    }
    for name, part in (("validation", rows[:MRPC_VALIDATION_ROWS]), ("test", rows[MRPC_VALIDATION_ROWS:])):
        files[name] = os.path.join(out, f"mrpc_{name}.csv")
        with open(files[name], "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([header, *part])
    return files, [
        "--text-column",
        "sentence1",
        "--text-pair-column",
        "sentence2",
        "--label-column",
        "label",
        "--label-type",
        "index",
        "--label-names",
        "different,paraphrase",
    ]


DATA = {"tweeteval": (tweeteval, 10_000), "mrpc": (mrpc, 2_576)}


def train(files: dict, flags: list, name: str, epochs: int, work: str) -> dict:
    job_dir = os.path.join(work, "jobs", f"calibration-{name}-{epochs}")
    command = [
        sys.executable,
        "-m",
        "trainer.task",
        "--training-file",
        files["train"],
        "--validation-file",
        files["validation"],
        "--testing-file",
        files["test"],
        *flags,
        "--epochs",
        str(epochs),
        "--job-dir",
        job_dir,
        "--overwrite",
        "--log-every-seconds",
        "60",
    ]
    log(f"training {epochs} epoch(s) on {name} with default flags (log: {job_dir}.log)")
    run_measured(command, f"{job_dir}.log")
    with open(os.path.join(job_dir, "metrics.json"), encoding="utf-8") as f:
        return json.load(f), job_dir


def decision(block: dict) -> list:
    """The lines saying what the run did with T and the test ECE each choice gives the export."""
    test = block["test"]
    kept = test["ece_after"] if block["applied"] else test["ece_before"]
    return [
        f"decision: {'applied' if block['applied'] else 'not applied (the export keeps T = 1)'}: {block['why']}",
        f"test ECE of the export {kept:.4f}; T applied regardless {test['ece_after']:.4f}, "
        f"never {test['ece_before']:.4f}",
    ]


def pooled_logits(metrics: dict, files: dict, job_dir: str) -> tuple:
    """(logits [N, C], labels [N]) of the validation and test rows, from the export's
    probabilities and the temperature it divides by."""
    from trainer.reporting.predictions import logits_from_probabilities

    rows = []
    for name in ("validation", "test"):
        scored = os.path.join(job_dir, f"{name}_scored.csv")
        if os.path.exists(scored):  # this script's, from an earlier run
            os.remove(scored)
        rows += predict_file(os.path.join(job_dir, "model"), files[name], scored)[1]
    probabilities = np.array([[float(row[f"probability_{label}"]) for label in metrics["labels"]] for row in rows])
    block = metrics["calibration"]
    return (
        logits_from_probabilities(probabilities, block["temperature"] if block["applied"] else 1.0),
        np.array([int(row["label"]) for row in rows]),
    )


def resplit(logits, labels, rounds: int, validation_rows: int, seed: int = 0) -> dict:
    """Test ECE under each policy over `rounds` random draws of `validation_rows` rows as
    validation, the others as test."""
    from trainer.reporting import calibration

    rng = np.random.default_rng(seed)
    ece = {"rule": [], "unless_at_bound": [], "never": []}
    kept = 0
    for _ in range(rounds):
        order = rng.permutation(len(labels))
        valid, test = order[:validation_rows], order[validation_rows:]
        block = calibration.calibration_block(
            {"validation": (logits[valid], labels[valid]), "test": (logits[test], labels[test])}, applied=True
        )
        scores = block["test"]
        kept += block["applied"]
        ece["rule"].append(scores["ece_after"] if block["applied"] else scores["ece_before"])
        ece["unless_at_bound"].append(scores["ece_before"] if block["at_bound"] else scores["ece_after"])
        ece["never"].append(scores["ece_before"])
    rule, before = np.array(ece["rule"]), np.array(ece["unless_at_bound"])
    return {
        "validation_rows": validation_rows,
        "rounds": rounds,
        "kept": kept,
        "mean_test_ece": {name: float(np.mean(values)) for name, values in ece.items()},
        "refused_lower": int(np.sum(rule < before)),
        "refused_higher": int(np.sum(rule > before)),
    }


def resplit_table(results: list, rows: int) -> str:
    columns = ["validation rows", "T kept", "test ECE: rule", "unless at bound", "never", "refused: lower", "higher"]
    return (
        f"resplits: {results[0]['rounds']} random draws from the {rows:,} validation and test rows "
        f"(the rest is test); 'refused': the rule refused a T the bound allowed, and the test "
        f"ECE came out lower or higher for it\n"
        + table(
            [
                [
                    str(r["validation_rows"]),
                    str(r["kept"]),
                    *(f"{r['mean_test_ece'][name]:.4f}" for name in ("rule", "unless_at_bound", "never")),
                    str(r["refused_lower"]),
                    str(r["refused_higher"]),
                ]
                for r in results
            ],
            columns,
        )
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=sorted(DATA), default="tweeteval")
    parser.add_argument("--train-rows", type=int, help="the first N training rows (default: all)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--resplits", type=int, default=200, help="random draws of validation rows to judge the rule on (0: none)"
    )
    parser.add_argument("--work-dir", default=WORK, help="scratch: data, job dir, log")
    args = parser.parse_args()
    work = os.path.abspath(args.work_dir)
    os.makedirs(os.path.join(work, "jobs"), exist_ok=True)
    splits, total = DATA[args.data]
    rows = min(args.train_rows or total, total)
    files, flags = splits(work, rows)
    metrics, job_dir = train(files, flags, args.data, args.epochs, work)
    block = metrics["calibration"]
    logits, labels = pooled_logits(metrics, files, job_dir) if args.resplits else (None, [])
    resplits = [resplit(logits, labels, args.resplits, size) for size in (100, 250, len(labels) // 2) if args.resplits]
    with printed() as text:
        print(
            f"\nbench/calibration.py: {args.data}, {rows:,} training rows, defaults, {args.epochs} epoch(s); "
            f"best epoch {metrics['best_epoch']}; test accuracy {metrics['test']['accuracy']:.3f}, "
            f"macro-recall {metrics['test']['macro_recall']:.3f}; temperature {block['temperature']:.3f}"
        )
        print(f"{'':20s}{'before':>8s}{'after':>8s}")
        for name, split, score, spec in ROWS:
            print(f"{name:20s}{block[split][score + '_before']:>8{spec}}{block[split][score + '_after']:>8{spec}}")
        print("\n".join(decision(block)))
        if resplits:
            print(resplit_table(resplits, len(labels)))
    publish(
        "calibration",
        {
            "machine": machine(),
            "data": args.data,
            "train_rows": rows,
            "epochs": args.epochs,
            "best_epoch": metrics["best_epoch"],
            "test": metrics["test"],
            "calibration": block,
            "resplits": resplits,
        },
        text.getvalue(),
    )


if __name__ == "__main__":
    main()
