"""Benchmark (issue 68): `--task embedding` on single texts labelled with classes, trained with
the supervised contrastive loss over batches of runs of texts per class (--loss auto picks it for
a file of single texts with a class column), scored by kNN accuracy.

    python bench/embedding_labels.py [--train-rows 2000] [--epochs 1] [--publish]

- the texts: TweetEval's sentiment tweets (../shared/data/tweeteval, three classes), split as
  the other TweetEval benchmarks split them (bench/calibration.py): the first --train-rows of
  the first 10,000 lines of test_* to train, val_* to validate; no text is in both;
- the score: each validation tweet's class as the vote of its 5 nearest other validation tweets
  by cosine (kNN accuracy), and the loss over the whole split, before training (metrics.json's
  zero_shot: the encoder's own vectors) and after;
- the trainer: `python -m trainer.task --task embedding` at its defaults but --epochs.

The run is kept under bench/work/embedding_labels/ and reused by a rerun on the same CPU.
Nothing else should run meanwhile.
"""

import argparse
import os
import sys

from calibration import tweeteval
from common import WORK, add_publish_flag, log, printed, publish, table, train_once

HERE = os.path.join(WORK, "embedding_labels")
METRICS = ("knn_accuracy", "loss")


def compare(metrics: dict) -> dict:
    """kNN accuracy and loss before training (zero-shot) and after, and whether each improved."""
    before, after = metrics["zero_shot"]["validation"], metrics["validation"]
    return {
        "loss_used": metrics["hyperparameters"]["loss"],
        "train_seconds": metrics["durations"]["train"],
        "train_texts": metrics["dataset_sizes"]["train"],
        "validation_texts": metrics["dataset_sizes"]["validation"],
        **{f"zero_shot_{key}": before[key] for key in METRICS},
        **{key: after[key] for key in METRICS},
        "better": {
            "knn_accuracy": after["knn_accuracy"] > before["knn_accuracy"],
            "loss": after["loss"] < before["loss"],
        },
    }


def report(result: dict) -> None:
    print(
        f"\nTweetEval sentiment: {result['train_texts']:,} training tweets, {result['validation_texts']:,} "
        "validation tweets, 3 classes"
    )
    rows = [[key, f"{result[f'zero_shot_{key}']:.4f}", f"{result[key]:.4f}"] for key in METRICS]
    print(table(rows, ["metric", "zero-shot", "trained"]))
    print(f"--loss {result['loss_used']}; training {result['train_seconds']:.0f} s")


def train(train_rows: int, epochs: int, here: str = HERE) -> dict:
    """metrics.json of the trainer's run on TweetEval (run now unless kept from this CPU)."""
    os.makedirs(here, exist_ok=True)
    files, flags = tweeteval(here, train_rows)
    log(f"trainer: --task embedding on {train_rows:,} labelled tweets, {epochs} epoch(s)")
    data = ["--training-file", files["train"], "--validation-file", files["validation"], *flags]
    return train_once(
        os.path.join(here, f"job-{train_rows}-{epochs}"), ["--task", "embedding", *data, "--epochs", str(epochs)]
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-rows", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=1)
    add_publish_flag(parser)
    args = parser.parse_args(argv)
    metrics = train(args.train_rows, args.epochs)
    with printed() as text:
        result = compare(metrics)
        report(result)
    if args.publish:
        log(f"Results: {publish('embedding_labels', {'result': result}, text.getvalue())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
