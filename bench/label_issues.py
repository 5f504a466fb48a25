"""Issue 39's "Label issues" bar: with 5% of SST-2's training labels flipped at random (seeded),
does `--find-label-issues` list at least 60% of the flipped rows among its top-ranked rows, at
60% precision or better? And what does the cross-fitting cost against the run itself?

SST-2 from ../shared/data/sst2 (train.tsv, dev.tsv: sentence, label 0/1). On a 2-core machine the
full 60,614 training rows would take hours with k folds, so the run trains on a seeded sample of
--train-rows of them (validated on a sample of --validation-rows of dev.tsv), everything else at
the trainer's defaults (4 folds, the default encoder and epochs). The flipped rows are known by
their line in the written training file, which is label_issues.csv's `row`.

    python bench/label_issues.py [--train-rows 2000] [--validation-rows 500]
                                 [--encoder all-mpnet-base-v2] [--publish]

Figures: of the training rows label_issues.csv flags, how many were flipped (precision) and how
many flipped rows it flags (recall); the same for its top-k rows in the file's order, k = the
number flipped (the folds flag, the mean of the folds' and the run's model's probabilities
ranks: trainer.training.label_issues); and the run's durations (metrics.json): the
cross-fitting's seconds against the rest of the run. Beside them, the same top-k figures for
the run's own model alone, free of cross-fitting: every training row ordered by the probability
the exported model (its best validation epoch) gives its label, from trainer.predict on the
training file (in-sample: a network fits the clean majority before it memorizes noise, Arpit et
al. 2017).
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time

import mpnet_weights
import numpy as np
from common import WORK, add_publish_flag, machine, predict_file, printed, publish, read_sst2_tsv, table, write_sst2_tsv

HERE = os.path.dirname(os.path.abspath(__file__))
SST2 = os.path.join(HERE, "..", "..", "shared", "data", "sst2")


def noisy_data(work: str, train_rows: int, validation_rows: int, flip: float, seed: int):
    """(train path, validation path, the flipped rows' line numbers in the train file)."""
    rng = np.random.default_rng(seed)
    train = read_sst2_tsv(os.path.join(SST2, "train.tsv"))
    dev = read_sst2_tsv(os.path.join(SST2, "dev.tsv"))
    train = [train[i] for i in np.sort(rng.choice(len(train), train_rows, replace=False))]
    dev = [dev[i] for i in np.sort(rng.choice(len(dev), validation_rows, replace=False))]
    flipped = np.sort(rng.choice(len(train), int(round(flip * len(train))), replace=False))
    for i in flipped:
        train[i] = [train[i][0], str(1 - int(train[i][1]))]
    paths = os.path.join(work, "train.tsv"), os.path.join(work, "dev.tsv")
    write_sst2_tsv(paths[0], train)
    write_sst2_tsv(paths[1], dev)
    return paths[0], paths[1], set(int(i) + 2 for i in flipped)  # the header is line 1


def scores(flagged_rows, flipped: set) -> dict:
    found = [row in flipped for row in flagged_rows]
    top = found[: len(flipped)]
    return {
        "flagged": len(found),
        "flipped": len(flipped),
        "flagged_flipped": int(sum(found)),
        "precision": sum(found) / len(found) if found else None,
        "recall": sum(found) / len(flipped),
        "top_k": len(top),
        "top_k_precision": sum(top) / len(top) if top else None,
        "top_k_recall": sum(top) / len(flipped),
    }


def in_sample_ranking(job: str, train: str) -> list:
    """The training file's line numbers, lowest probability of the given label first, from the
    run's exported model (trainer.predict keeps the rows in order; the header is line 1)."""
    _, rows = predict_file(os.path.join(job, "model"), train, os.path.join(job, "train-predictions.csv"))
    given = [float(row[f"probability_{row['label']}"]) for row in rows]
    return [int(i) + 2 for i in np.argsort(given, kind="stable")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-rows", type=int, default=2000)
    parser.add_argument("--validation-rows", type=int, default=500)
    parser.add_argument("--flip", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--encoder",
        choices=("default", "all-mpnet-base-v2"),
        default="default",
        help="the folds' and the run's encoder: the trainer's default, or the "
        "larger all-mpnet-base-v2 (fetched and checked by mpnet_weights.py)",
    )
    add_publish_flag(parser)
    args = parser.parse_args()
    work = os.path.join(WORK, "label_issues")
    os.makedirs(work, exist_ok=True)
    train, dev, flipped = noisy_data(work, args.train_rows, args.validation_rows, args.flip, args.seed)
    job = os.path.join(work, f"job-{int(time.time())}")
    command = [
        sys.executable,
        "-m",
        "trainer.task",
        "--training-file",
        train,
        "--validation-file",
        dev,
        "--job-dir",
        job,
        "--find-label-issues",
        "--export-bfloat16",
        "off",
        "--export-int8",
        "off",
        *(["--encoder", mpnet_weights.fetch()] if args.encoder != "default" else []),
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=os.path.dirname(HERE))
    seconds = time.perf_counter() - start
    with open(os.path.join(job, "metrics.json")) as f:
        metrics = json.load(f)
    with open(os.path.join(job, "label_issues.csv"), newline="", encoding="utf-8") as f:
        issues = [r for r in csv.DictReader(f) if r["split"] == "train"]
    result = scores([int(r["row"]) for r in issues], flipped)
    in_sample = scores(in_sample_ranking(job, train), flipped)
    durations = metrics["durations"]
    base = durations["total"] - durations["label_issues"]
    with printed() as text:
        print(
            f"bench/label_issues.py: SST-2, {args.train_rows} training rows (seeded sample of "
            f"60,614), {args.flip:.0%} of their labels flipped (seed {args.seed}); validated on "
            f"{args.validation_rows} rows of dev.tsv; --find-label-issues with "
            f"{metrics['label_issues']['folds']} folds, encoder {args.encoder}, defaults "
            f"otherwise; {machine()['cpus']} CPUs\n"
        )
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        print(
            table(
                [
                    [
                        str(result["flipped"]),
                        str(result["flagged"]),
                        str(result["flagged_flipped"]),
                        fmt(result["precision"]),
                        fmt(result["recall"]),
                        str(result["top_k"]),
                        fmt(result["top_k_precision"]),
                        fmt(result["top_k_recall"]),
                    ]
                ],
                ["flipped", "flagged", "flagged & flipped", "precision", "recall", "top k", "precision@k", "recall@k"],
            )
        )
        print(
            f"\nthe run's own model alone on its training rows (in-sample), all rows ranked: "
            f"precision@k {fmt(in_sample['top_k_precision'])}, recall@k {fmt(in_sample['top_k_recall'])}"
        )
        print(
            f"\nvalidation accuracy {metrics['validation']['accuracy']:.4f} (on the noisy "
            f"training labels); run {durations['total']:.0f}s, of which cross-fitting "
            f"{durations['label_issues']:.0f}s: {durations['label_issues'] / base:.2f}x the rest "
            f"of the run ({base:.0f}s)"
        )
    out = {
        "machine": machine(),
        "args": vars(args),
        "scores": result,
        "in_sample_scores": {k: in_sample[k] for k in ("top_k", "top_k_precision", "top_k_recall")},
        "seconds": seconds,
        "durations": durations,
        "validation": metrics["validation"],
        "label_issues": metrics["label_issues"],
    }
    if args.publish:
        publish("label_issues", out, text.getvalue())


if __name__ == "__main__":
    main()
