"""How --distill-temperature and --distill-alpha's defaults were chosen: a grid on splits of SST-2's train.tsv.

Never on dev.tsv, which bench/distill.py scores. The same seeded --train-rows of train.tsv as
bench/distill.py are the labelled data (the teacher was fine-tuned on them); of the rest of
train.tsv, the first --transfer-rows are the unlabelled transfer set and the next --score-rows,
labels kept, are the held-out split every setting is scored on (5,000 rows: a standard error
of about 0.4 points, where the trainer's carved validation split of 1,000 has 0.9).

The teacher's outputs come from a file (--teacher-probabilities: bench/distill.py's distilled
run writes it into its job dir's teacher/ folder, covering the whole of train.tsv), so each
setting costs one student run. Each run is shortened to --epochs 2 and is scored with
trainer.predict's float32 export; "none" is the student without a teacher, on the same rows and
epochs.

    python bench/distill_settings.py --teacher-probabilities FILE [--settings 2:0.5,1:0.5,...] [--publish]
"""
import argparse
import csv
import os

import numpy as np

from common import (WORK, add_publish_flag, log, machine, predict_file, printed, publish, read_sst2_tsv,
                    table, train_once, write_sst2_tsv)

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_TSV = os.path.join(HERE, "..", "..", "shared", "data", "sst2", "train.tsv")
# Around the literature's usual values (Hinton et al. 2015; DistilBERT: T=2): the temperature at a
# fixed alpha, then alpha at a fixed temperature.
SETTINGS = "none,1:0.5,2:0.5,4:0.5,2:0.2,2:0.8"


def splits(work: str, args) -> dict:
    """The labelled rows (bench/distill.py's seeded draw), the transfer set and the scored split."""
    rows = read_sst2_tsv(TRAIN_TSV)
    order = np.random.default_rng(args.seed).permutation(len(rows))
    labelled = [rows[i] for i in np.sort(order[:args.train_rows])]
    rest = [rows[i] for i in np.sort(order[args.train_rows:])]
    transfer, scored = rest[:args.transfer_rows], rest[args.transfer_rows:args.transfer_rows + args.score_rows]
    paths = {name: os.path.join(work, f"{name}.tsv") for name in ("train", "transfer", "scored")}
    write_sst2_tsv(paths["train"], labelled)
    write_sst2_tsv(paths["scored"], scored)
    with open(paths["transfer"], "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        writer.writerow(["sentence"])
        writer.writerows([sentence] for sentence, _ in transfer)
    return {**paths, "labels": [label for _, label in scored]}


def teacher_accuracy(path: str, scored_tsv: str, labels: list) -> float:
    """The teacher's accuracy on the scored split, from its file (the argmax of its probabilities)."""
    with open(path, newline="", encoding="utf-8") as f:
        by_text = {row["sentence"]: row for row in csv.DictReader(f)}
    texts = [sentence for sentence, _ in read_sst2_tsv(scored_tsv)]
    return float(np.mean([str(int(float(by_text[t]["probability_1"]) > 0.5)) == label
                          for t, label in zip(texts, labels)]))


def run(work: str, setting: str, data: dict, args) -> dict:
    job = os.path.join(work, f"job-{setting.replace(':', '-')}")
    flags = []
    if setting != "none":
        temperature, alpha = setting.split(":")
        flags = ["--teacher-probabilities", args.teacher_probabilities, "--unlabeled-file", data["transfer"],
                 "--distill-temperature", temperature, "--distill-alpha", alpha]
    metrics = train_once(job, ["--training-file", data["train"], "--epochs", str(args.epochs), *flags])
    _, rows = predict_file(os.path.join(job, "model"), data["scored"], os.path.join(job, "scored.csv"))
    accuracy = float(np.mean([row["predicted_label"] == label for row, label in zip(rows, data["labels"])]))
    validation = metrics["validation"]["accuracy"]
    return {"setting": setting, "accuracy": accuracy, "validation_accuracy": validation}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher-probabilities", required=True)
    parser.add_argument("--settings", default=SETTINGS, help="comma-separated TEMPERATURE:ALPHA, or none")
    parser.add_argument("--train-rows", type=int, default=10_000)
    parser.add_argument("--transfer-rows", type=int, default=5_000)
    parser.add_argument("--score-rows", type=int, default=5_000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    add_publish_flag(parser)
    args = parser.parse_args()
    work = os.path.join(WORK, "distill-settings")
    os.makedirs(work, exist_ok=True)
    data = splits(work, args)
    results = []
    for setting in args.settings.split(","):
        results.append(run(work, setting, data, args))
        log(f"{setting}: held-out accuracy {results[-1]['accuracy']:.4f}")
    teacher = teacher_accuracy(args.teacher_probabilities, data["scored"], data["labels"])
    with printed() as text:
        print(f"bench/distill_settings.py: SST-2 train.tsv, {args.train_rows} labelled rows (seeded), "
              f"{args.transfer_rows} unlabelled, scored on {args.score_rows} held-out rows; "
              f"{args.epochs} epochs; {machine()['cpus']} CPUs; the teacher scores {teacher:.4f}\n")
        print(table([[r["setting"], f"{r['accuracy']:.4f}", f"{r['validation_accuracy']:.4f}"] for r in results],
                    ["temperature:alpha", "held-out acc", "carved val acc"]))
    if args.publish:
        publish("distill_settings", {"machine": machine(), "args": vars(args), "teacher_accuracy": teacher,
                                     "results": results}, text.getvalue())


if __name__ == "__main__":
    main()
