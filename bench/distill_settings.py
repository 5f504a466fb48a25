"""How --distill-temperature and --distill-alpha's defaults are chosen: a grid on leak-free splits of SST-2.

bench/sst2_whole.py's protocol, as bench/distill.py's: the same seeded --train-rows of the pool
are the labelled data (the teacher was fine-tuned on them); of the rest of the pool, the first
--transfer-rows are the unlabelled transfer set. Every setting is scored on the 1,000 held-out
validation sentences (whole sentences; no pool row lies inside one), never on the test sentences
bench/distill.py reports. (This bench's first run scored 5,000 rows of a random split of GLUE's
training set, most of them phrases of training or transfer rows:
bench/results/2026-11-28-xeon-avx512-distill_settings.json keeps it.)

The teacher's outputs come from a file (--teacher-probabilities: bench/distill.py's distilled
run writes it into its job dir's teacher/ folder, covering its training, transfer and validation
rows), so each setting costs one student run. Each run is shortened to --epochs 2 and is scored
with trainer.predict's float32 export; "none" is the student without a teacher, on the same rows
and epochs.

    python bench/distill_settings.py --teacher-probabilities FILE [--settings 2:0.5,1:0.5,...] [--publish]
"""

import argparse
import csv
import os

import numpy as np
import sst2_whole
from common import (
    WORK,
    add_publish_flag,
    log,
    machine,
    predict_file,
    printed,
    publish,
    read_sst2_tsv,
    table,
    train_once,
    write_sst2_tsv,
)

# Around the literature's usual values (Hinton et al. 2015; DistilBERT: T=2): the temperature at a
# fixed alpha, then alpha at a fixed temperature.
SETTINGS = "none,1:0.5,2:0.5,4:0.5,2:0.2,2:0.8"


def splits(work: str, args) -> dict:
    """The labelled rows (bench/distill.py's seeded draw from the pool), the transfer set and the
    validation sentences every setting is scored on."""
    split = sst2_whole.load(seed=args.seed)
    pool = split.pool
    order = np.random.default_rng(args.seed).permutation(len(pool))
    labelled = [pool[i] for i in np.sort(order[: args.train_rows])]
    transfer = [pool[i] for i in np.sort(order[args.train_rows :])][: args.transfer_rows]
    paths = {name: os.path.join(work, f"{name}.tsv") for name in ("train", "transfer", "scored")}
    write_sst2_tsv(paths["train"], labelled)
    write_sst2_tsv(paths["scored"], split.validation)
    with open(paths["transfer"], "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        writer.writerow(["sentence"])
        writer.writerows([sentence] for sentence, _ in transfer)
    return {**paths, "labels": [label for _, label in split.validation]}


def teacher_accuracy(path: str, scored_tsv: str, labels: list) -> float:
    """The teacher's accuracy on the scored split, from its file (the argmax of its probabilities)."""
    with open(path, newline="", encoding="utf-8") as f:
        by_text = {row["sentence"]: row for row in csv.DictReader(f)}
    texts = [sentence for sentence, _ in read_sst2_tsv(scored_tsv)]
    return float(
        np.mean([str(int(float(by_text[t]["probability_1"]) > 0.5)) == label for t, label in zip(texts, labels)])
    )


def run(work: str, setting: str, data: dict, args) -> dict:
    job = os.path.join(work, f"job-{setting.replace(':', '-')}")
    flags = []
    if setting != "none":
        temperature, alpha = setting.split(":")
        flags = [
            "--teacher-probabilities",
            args.teacher_probabilities,
            "--unlabeled-file",
            data["transfer"],
            "--distill-temperature",
            temperature,
            "--distill-alpha",
            alpha,
        ]
    metrics = train_once(
        job,
        ["--training-file", data["train"], "--validation-file", data["scored"], "--epochs", str(args.epochs), *flags],
    )
    _, rows = predict_file(os.path.join(job, "model"), data["scored"], os.path.join(job, "scored.csv"))
    accuracy = float(np.mean([row["predicted_label"] == label for row, label in zip(rows, data["labels"])]))
    return {"setting": setting, "accuracy": accuracy, "best_epoch": metrics["best_epoch"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher-probabilities", required=True)
    parser.add_argument("--settings", default=SETTINGS, help="comma-separated TEMPERATURE:ALPHA, or none")
    parser.add_argument("--train-rows", type=int, default=10_000)
    parser.add_argument("--transfer-rows", type=int, default=5_000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    add_publish_flag(parser)
    args = parser.parse_args()
    work = os.path.join(WORK, "distill-settings-whole")
    os.makedirs(work, exist_ok=True)
    data = splits(work, args)
    results = []
    for setting in args.settings.split(","):
        results.append(run(work, setting, data, args))
        log(f"{setting}: held-out accuracy {results[-1]['accuracy']:.4f}")
    teacher = teacher_accuracy(args.teacher_probabilities, data["scored"], data["labels"])
    with printed() as text:
        print(
            f"bench/distill_settings.py: SST-2 whole sentences (bench/sst2_whole.py), {args.train_rows} "
            f"labelled rows (seeded), {args.transfer_rows} unlabelled, scored on "
            f"{len(data['labels'])} held-out validation sentences; "
            f"{args.epochs} epochs; {machine()['cpus']} CPUs; the teacher scores {teacher:.4f}\n"
        )
        print(
            table(
                [[r["setting"], f"{r['accuracy']:.4f}", str(r["best_epoch"])] for r in results],
                ["temperature:alpha", "validation acc", "best epoch"],
            )
        )
    if args.publish:
        publish(
            "distill_settings",
            {"machine": machine(), "args": vars(args), "teacher_accuracy": teacher, "results": results},
            text.getvalue(),
        )


if __name__ == "__main__":
    main()
