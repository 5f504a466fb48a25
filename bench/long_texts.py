"""Issue 38's long-document bench: on IMDB reviews, what each --long-texts setting scores on
dev.csv, what its training costs, and how fast its export predicts, all in one run.

IMDB from ../shared/data/imdb (train.csv: 10,000 reviews of the official train half, balanced;
dev.csv: 2,000 others; columns text, label). Every setting trains on the same seeded sample of
--train-rows reviews and validates on the same --validation-rows of dev.csv, at the trainer's
defaults otherwise (the default encoder, epochs, learning rate; no checked copies). On a 2-core
machine a 512-token epoch of all 10,000 reviews takes most of an hour, so the default sample is
smaller; the comparison between settings is what the bench is for.

    python bench/long_texts.py [--train-rows 2000] [--validation-rows 1000]
                               [--settings truncate:128,windows:128x8:mean,...] [--publish]

Figures per setting: dev accuracy over all reviews and over those of more than 400 words (from
trainer.predict's labels on dev), the run's training seconds (metrics.json durations.train) and
their ratio to truncation at 128's, and trainer.predict's throughput on dev in texts/s and
tokens/s (tokens: the default encoder's WordPiece tokens of each whole review, before any cut).
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
from common import WORK, add_publish_flag, machine, predict_file, printed, publish, table

HERE = os.path.dirname(os.path.abspath(__file__))
IMDB = os.path.join(HERE, "..", "..", "shared", "data", "imdb")
BASELINE = "truncate:128"
# MODE:MAX_SEQ_LENGTH, or windows:MAX_SEQ_LENGTHxMAX_WINDOWS:POOLING (the list)
SETTINGS = (
    BASELINE,
    "truncate:256",
    "truncate:512",
    "head-tail:512",
    *(f"windows:{size}:{pooling}" for size in ("128x8", "256x4") for pooling in ("mean", "max", "attention")),
)
LONG_WORDS = 400  # the "reviews over 400 words"


def read_rows(path: str) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return [(row["text"], row["label"]) for row in csv.DictReader(f)]


def write_rows(path: str, rows: list) -> str:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


def sample(work: str, train_rows: int, validation_rows: int, seed: int) -> tuple:
    """(train path, dev path, dev rows): seeded samples, written once per run."""
    rng = np.random.default_rng(seed)
    train, dev = read_rows(os.path.join(IMDB, "train.csv")), read_rows(os.path.join(IMDB, "dev.csv"))
    train = [train[i] for i in np.sort(rng.choice(len(train), min(train_rows, len(train)), replace=False))]
    dev = [dev[i] for i in np.sort(rng.choice(len(dev), min(validation_rows, len(dev)), replace=False))]
    return write_rows(os.path.join(work, "train.csv"), train), write_rows(os.path.join(work, "dev.csv"), dev), dev


def run_setting(work: str, setting: str, train: str, dev: str) -> dict:
    """Trains one setting, then predicts dev with its export; returns its figures."""
    job = os.path.join(work, f"job-{setting.replace(':', '-')}-{int(time.time())}")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.task",
            "--training-file",
            train,
            "--validation-file",
            dev,
            "--job-dir",
            job,
            *setting_flags(setting),
            "--export-bfloat16",
            "off",
            "--export-int8",
            "off",
            "--report-explanations",
            "0",
        ],
        check=True,
        cwd=os.path.dirname(HERE),
    )
    with open(os.path.join(job, "metrics.json")) as f:
        metrics = json.load(f)
    printed_lines, rows = predict_file(os.path.join(job, "model"), dev, os.path.join(job, "dev-predictions.csv"))
    # "predicted N rows in T (R rows/s)": the prediction itself, without the start and model load
    rate = re.search(r"predicted \d+ rows in .* \(([\d,.]+) rows/s\)", printed_lines).group(1)
    rate = float(rate.replace(",", ""))
    predicted = [row["predicted_label"] for row in rows]
    return {
        "setting": setting,
        "metrics_validation": metrics["validation"],
        "train_seconds": metrics["durations"]["train"],
        "predicted": predicted,
        "predict_texts_per_second": rate,
        "epochs": metrics["hyperparameters"]["epochs"],
        "best_epoch": metrics["best_epoch"],
    }


def setting_flags(setting: str) -> list:
    """trainer.task's flags of "truncate:128" or "windows:128x8:mean"."""
    mode, length, *pooling = setting.split(":")
    if mode != "windows":
        return ["--long-texts", mode, "--max-seq-length", length]
    length, windows = length.split("x")
    return [
        "--long-texts",
        mode,
        "--max-seq-length",
        length,
        "--max-windows",
        windows,
        "--window-pooling",
        *(pooling or ["mean"]),
    ]


def dev_tokens(dev_rows: list) -> int:
    """The default encoder's tokens over every dev review, uncut."""
    import tensorflow as tf

    from trainer.modeling.encoders import DEFAULT_ENCODER, load_encoder

    preprocessor = load_encoder(DEFAULT_ENCODER).preprocessor
    total = 0
    for i in range(0, len(dev_rows), 256):
        pieces = preprocessor.tokenize(tf.constant([text for text, _ in dev_rows[i : i + 256]]))
        total += int(pieces.merge_dims(1, -1).row_lengths().numpy().sum())
    return total


def scores(result: dict, dev_rows: list) -> dict:
    right = np.asarray([p == label for p, (_, label) in zip(result["predicted"], dev_rows)])
    long_rows = np.asarray([len(text.split()) > LONG_WORDS for text, _ in dev_rows])
    return {
        "accuracy": float(right.mean()),
        "accuracy_over_400_words": float(right[long_rows].mean()),
        "reviews_over_400_words": int(long_rows.sum()),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-rows", type=int, default=2000)
    parser.add_argument("--validation-rows", type=int, default=1000)
    parser.add_argument(
        "--settings",
        default=",".join(SETTINGS),
        help=f"MODE:MAX_SEQ_LENGTH or windows:MAX_SEQ_LENGTHxMAX_WINDOWS:POOLING, "
        f"comma-separated; {BASELINE} always runs first",
    )
    parser.add_argument("--seed", type=int, default=0)
    add_publish_flag(parser)
    args = parser.parse_args()
    settings = [BASELINE] + [s for s in args.settings.split(",") if s != BASELINE]
    work = os.path.join(WORK, "long_texts")
    os.makedirs(work, exist_ok=True)
    train, dev, dev_rows = sample(work, args.train_rows, args.validation_rows, args.seed)
    tokens = dev_tokens(dev_rows)
    results = []
    for setting in settings:
        result = run_setting(work, setting, train, dev)
        result.update(scores(result, dev_rows))
        del result["predicted"]
        results.append(result)
        # One line per finished setting: a run cut short (hours on 2 cores) still shows its figures.
        print(
            f"bench/long_texts.py: {setting} done: dev acc {result['accuracy']:.4f}, over "
            f"{LONG_WORDS} words {result['accuracy_over_400_words']:.4f}, train "
            f"{result['train_seconds']:.0f}s, predict {result['predict_texts_per_second']:.1f} texts/s",
            flush=True,
        )
    base = results[0]
    with printed() as text:
        print(
            f"bench/long_texts.py: IMDB, {args.train_rows} training reviews (seeded sample of "
            f"train.csv), {args.validation_rows} of dev.csv ({base['reviews_over_400_words']} of "
            f"them over {LONG_WORDS} words); the default encoder and recipe; {machine()['cpus']} CPUs\n"
        )
        print(
            table(
                [
                    [
                        r["setting"],
                        f"{r['accuracy']:.4f}",
                        f"{r['accuracy'] - base['accuracy']:+.4f}",
                        f"{r['accuracy_over_400_words']:.4f}",
                        f"{r['accuracy_over_400_words'] - base['accuracy_over_400_words']:+.4f}",
                        f"{r['train_seconds']:.0f}",
                        f"{r['train_seconds'] / base['train_seconds']:.2f}",
                        f"{r['predict_texts_per_second']:.1f}",
                        f"{r['predict_texts_per_second'] * tokens / len(dev_rows):.0f}",
                    ]
                    for r in results
                ],
                [
                    "setting",
                    "dev acc",
                    "vs 128",
                    f"> {LONG_WORDS} words",
                    "vs 128",
                    "train s",
                    "x 128",
                    "predict texts/s",
                    "tokens/s",
                ],
            )
        )
        print(
            "\npredict: trainer.predict's own rate on dev (float32 export; start and model load left "
            "out); tokens/s counts each whole review's tokens, cut or not"
        )
    out = {"machine": machine(), "args": vars(args), "dev_tokens": tokens, "results": results}
    if args.publish:
        publish("long_texts", out, text.getvalue())


if __name__ == "__main__":
    main()
