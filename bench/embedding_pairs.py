"""Benchmark (issue 68): `--task embedding` on pairs without a score, trained with in-batch
negatives (--loss auto picks them for a file without a score column), scored as retrieval.

    python bench/embedding_pairs.py [--epochs 1] [--publish]

- the pairs: MRPC's paraphrases, the shared GLUE files' rows labelled 1 (../shared/data/glue:
  mrpc_train.csv to train, mrpc_dev.csv to validate), their label dropped: each pair a text
  and its paraphrase. A validation pair with a sentence that occurs in a training pair (case,
  spacing and punctuation aside) is left out, so no validation text was trained on;
- the score: each validation pair's first sentence a query, every validation second sentence a
  candidate, ranked by cosine: MRR@10, nDCG@10, recall@1 and recall@10, and the in-batch
  negatives' loss over the whole split, before training (metrics.json's zero_shot: the
  encoder's own vectors) and after;
- the trainer: `python -m trainer.task --task embedding` at its defaults but --epochs.

The run is kept under bench/work/embedding_pairs/ and reused by a rerun on the same CPU.
Nothing else should run meanwhile.
"""

import argparse
import csv
import os
import sys

from common import ROOT, WORK, add_publish_flag, kept_here, log, printed, publish, table, train_once
from embedding_reference import sentence_key

GLUE = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "glue"))
HERE = os.path.join(WORK, "embedding_pairs")
METRICS = ("mrr_at_10", "ndcg_at_10", "recall_at_1", "recall_at_10", "loss")


def paraphrases(path: str) -> list:
    """(sentence1, sentence2) of the MRPC file's rows labelled 1."""
    with open(path, newline="", encoding="utf-8") as f:
        return [(row["sentence1"], row["sentence2"]) for row in csv.DictReader(f) if row["label"].strip() == "1"]


def unseen(validation: list, train: list) -> list:
    """The validation pairs neither of whose sentences occurs in a training pair."""
    seen = {sentence_key(text) for pair in train for text in pair}
    return [pair for pair in validation if not any(sentence_key(text) in seen for text in pair)]


def write_pairs(path: str, pairs: list) -> str:
    kept_here(path)
    if not os.path.exists(path):
        with open(path + ".tmp", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["sentence1", "sentence2"])
            writer.writerows(pairs)
        os.replace(path + ".tmp", path)
    return path


def split(glue: str = GLUE) -> dict:
    """The training and validation files of unscored pairs, written under HERE."""
    if not os.path.exists(os.path.join(glue, "mrpc_train.csv")):
        sys.exit(f"error: needs GLUE MRPC in {glue} (mrpc_train.csv, mrpc_dev.csv)")
    train = paraphrases(os.path.join(glue, "mrpc_train.csv"))
    every = paraphrases(os.path.join(glue, "mrpc_dev.csv"))
    validation = unseen(every, train)
    return {
        "train_file": write_pairs(os.path.join(HERE, "train.csv"), train),
        "validation_file": write_pairs(os.path.join(HERE, "validation.csv"), validation),
        "train_pairs": len(train),
        "validation_pairs": len(validation),
        "validation_pairs_left_out": len(every) - len(validation),
    }


def compare(metrics: dict) -> dict:
    """Each retrieval metric before training (zero-shot) and after, and the change."""
    before, after = metrics["zero_shot"]["validation"], metrics["validation"]
    return {
        "loss_used": metrics["hyperparameters"]["loss"],
        "train_seconds": metrics["durations"]["train"],
        **{f"zero_shot_{key}": before[key] for key in METRICS},
        **{key: after[key] for key in METRICS},
        "better": {key: (after[key] < before[key]) if key == "loss" else (after[key] > before[key]) for key in METRICS},
    }


def report(result: dict, data: dict) -> None:
    print(
        f"\nMRPC paraphrases: {data['train_pairs']:,} training pairs, {data['validation_pairs']:,} validation pairs "
        f"({data['validation_pairs_left_out']} more left out: a sentence of theirs is in a training pair)"
    )
    rows = [[key, f"{result[f'zero_shot_{key}']:.4f}", f"{result[key]:.4f}"] for key in METRICS]
    print(table(rows, ["metric", "zero-shot", "trained"]))
    print(f"--loss {result['loss_used']}; training {result['train_seconds']:.0f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    add_publish_flag(parser)
    args = parser.parse_args(argv)
    os.makedirs(HERE, exist_ok=True)
    data = split()
    log(f"trainer: --task embedding on pairs without a score, {args.epochs} epoch(s)")
    files = ["--training-file", data["train_file"], "--validation-file", data["validation_file"]]
    metrics = train_once(
        os.path.join(HERE, f"job-{args.epochs}"), ["--task", "embedding", *files, "--epochs", str(args.epochs)]
    )
    with printed() as text:
        result = compare(metrics)
        report(result, data)
    if args.publish:
        log(f"Results: {publish('embedding_pairs', {'result': result, 'data': data}, text.getvalue())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
