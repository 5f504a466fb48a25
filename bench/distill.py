"""Issue 51's distillation bench, leak-free (issue #65): a large teacher's quality at a small
student's cost, in one run.

SST-2 (--data sst2-whole, the default) by bench/sst2_whole.py's protocol: 1,000 whole sentences of
GLUE's training set held out for validation and 1,000 for test, and every row lying inside one
removed; of the 39,925 rows left (the pool), a seeded --train-rows are the labelled data and the
rest, labels dropped, the unlabelled transfer set (--transfer-rows of it, all by default). (A
random split of GLUE's SST-2 training set is not held out: it holds every phrase of its sentences,
so most validation phrases lie inside training or transfer rows. This bench's first run, on such a
split, overstated distillation's gain; bench/results/2026-11-28-xeon-avx512-distill.json keeps it.)
Four models, each at the trainer's defaults otherwise (no checked copies), each validated on the
held-out validation sentences:

- teacher: all-mpnet-base-v2 (bench/mpnet_weights.py, sha256-checked) fine-tuned on the rows;
- student: the default encoder on the rows alone;
- distilled: the default encoder taught by the teacher (--teacher) on the rows and the transfer set;
- distilled-3: the same with --encoder-layers 3, from the distilled run's teacher file
  (--teacher-probabilities: the teacher labels the transfer set once).

One more when asked (--models student-gold; SST-2 only): the default encoder on the rows and the
transfer set with their own labels, the teacher replaced by the truth: what the transfer set could
teach at best, which tells a teacher that teaches little from a transfer set with little to teach.

    python bench/distill.py [--data sst2-whole|imdb] [--train-rows 10000] [--transfer-rows N]
                            [--models ...] [--teacher-job DIR] [--publish]
                            [--teacher-encoder default --student-layers 3]

--teacher-encoder default with --student-layers 3 is the same comparison at a sixth of the cost,
for data whose mpnet teacher takes too long on 2 cores (IMDB's reviews: about nine hours of
training): the default encoder is the teacher, its 3-layer copy the student, alone and distilled
(issue #65's own reduced check had this shape).

Each model's job dir is named by the model and the data's settings (bench/work/distill-DATA/
job-MODEL-ROWS-TRANSFER-sSEED): a rerun resumes an unfinished run (the teacher alone is over an
hour here) and reuses a finished one. --teacher-job takes a finished teacher run trained on the
same seeded rows elsewhere.

Figures per model: accuracy on the held-out test sentences over all rows and over rows of 10 or
more words, the run's training seconds (metrics.json durations.train; the teacher's labelling of
the transfer set is durations.teacher, shown apart), and trainer.predict's rate on them (float32
export), each also as a ratio to the student's. With --data imdb: imdb/train.csv's --train-rows
reviews, imdb/unlabeled.csv as the transfer set, imdb/dev.csv to score (10+ words is every review
there; reviews are whole documents, disjoint by the data's construction), --long-texts as
--long-texts says.
"""

import argparse
import csv
import json
import os
import re
import sys

import numpy as np
import sst2_whole as sst2_whole_split
from common import (
    WORK,
    add_publish_flag,
    machine,
    metrics_of,
    predict_file,
    printed,
    publish,
    table,
    train_once,
    write_sst2_tsv,
)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
MODELS = ("student", "teacher", "distilled", "distilled-3")
TEACHER = "all-mpnet-base-v2"
ASKED = ("student-gold",)
LONG_WORDS = 10


def sst2_whole(work: str, train_rows: int, transfer_rows, seed: int) -> dict:
    """Paths of the labelled rows, the unlabelled transfer set, the validation and the test
    sentences (bench/sst2_whole.py), written once per run."""
    split = sst2_whole_split.load(seed=seed)
    print(sst2_whole_split.describe(split), flush=True)
    pool = split.pool
    order = np.random.default_rng(seed).permutation(len(pool))
    labelled, rest = [pool[i] for i in np.sort(order[:train_rows])], [pool[i] for i in np.sort(order[train_rows:])]
    rest = rest[:transfer_rows] if transfer_rows else rest
    paths = {name: os.path.join(work, f"{name}.tsv") for name in ("train", "unlabeled", "validation", "test", "gold")}
    for name, rows in (
        ("train", labelled),
        ("validation", split.validation),
        ("test", split.test),
        ("gold", labelled + rest),
    ):
        write_sst2_tsv(paths[name], rows)
    with open(paths["unlabeled"], "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        writer.writerow(["sentence"])
        writer.writerows([sentence] for sentence, _ in rest)
    return {
        "train": paths["train"],
        "gold": paths["gold"],
        "unlabeled": paths["unlabeled"],
        "validation": paths["validation"],
        "dev": paths["test"],
        "dev_rows": split.test,
        "transfer": len(rest),
        "counts": split.counts,
    }


def imdb(work: str, train_rows: int, transfer_rows, seed: int) -> dict:
    def read(name):
        with open(os.path.join(DATA, "imdb", name), newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    train, unlabeled = read("train.csv"), read("unlabeled.csv")
    chosen = np.sort(np.random.default_rng(seed).choice(len(train), min(train_rows, len(train)), replace=False))
    unlabeled = unlabeled[:transfer_rows] if transfer_rows else unlabeled
    paths = {"train": os.path.join(work, "train.csv"), "unlabeled": os.path.join(work, "unlabeled.csv")}
    for name, rows, columns in (
        ("train", [train[i] for i in chosen], ["text", "label"]),
        ("unlabeled", unlabeled, ["text"]),
    ):
        with open(paths[name], "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    dev = os.path.join(DATA, "imdb", "dev.csv")
    return {
        **paths,
        "dev": dev,
        "dev_rows": [(r["text"], r["label"]) for r in read("dev.csv")],
        "transfer": len(unlabeled),
    }


def model_flags(model: str, data: dict, jobs: dict, args) -> list:
    """trainer.task's flags of one model (the distilled ones after the teacher)."""
    student = ["--encoder-layers", str(args.student_layers)] if args.student_layers else []
    if model == "teacher":
        import mpnet_weights

        return ["--encoder", mpnet_weights.fetch()] if args.teacher_encoder == TEACHER else []
    if model == "distilled":
        return ["--teacher", os.path.join(jobs["teacher"], "model"), "--unlabeled-file", data["unlabeled"], *student]
    if model == "distilled-3":
        return [
            "--teacher-probabilities",
            teacher_file(jobs["distilled"]),
            "--unlabeled-file",
            data["unlabeled"],
            "--encoder-layers",
            "3",
        ]
    return student


def teacher_file(job: str) -> str:
    """The teacher's outputs the distilled run wrote (metrics.json's distillation.teacher_file)."""
    with open(os.path.join(job, "metrics.json")) as f:
        return json.load(f)["distillation"]["teacher_file"]


def job_dir(work: str, model: str, args) -> str:
    """A model's job dir: the same for the same data settings, so a rerun resumes it."""
    if model == "teacher" and args.teacher_job:
        if not os.path.exists(os.path.join(args.teacher_job, "metrics.json")):
            sys.exit(f"error: --teacher-job: {args.teacher_job} holds no finished run (metrics.json)")
        return os.path.abspath(args.teacher_job)
    long_texts = f"-{args.long_texts}" if args.long_texts else ""
    teacher = "" if args.teacher_encoder == TEACHER or model not in ("teacher", "distilled") else "-tdefault"
    layers = f"-l{args.student_layers}" if args.student_layers and model != "teacher" else ""
    return os.path.join(
        work, f"job-{model}-{args.train_rows}-{args.transfer_rows or 'all'}{long_texts}{teacher}{layers}-s{args.seed}"
    )


def finished_run(model: str, job: str, flags: list, args) -> dict:
    """The model's metrics.json. --teacher-job's run is read as it is: it was trained outside this
    bench, on whatever machine (its row says its time was not measured here), so it has no machine
    record to check; every other run is trained here once (train_once)."""
    if model == "teacher" and args.teacher_job:
        return metrics_of(job)
    return train_once(job, flags)


def run_model(work: str, model: str, data: dict, jobs: dict, args) -> dict:
    job = jobs[model] = job_dir(work, model, args)
    validation = ["--validation-file", data["validation"]] if data.get("validation") else []
    long_texts = ["--long-texts", args.long_texts] if args.long_texts else []
    train = data["gold"] if model == "student-gold" else data["train"]
    metrics = finished_run(
        model, job, ["--training-file", train, *validation, *long_texts, *model_flags(model, data, jobs, args)], args
    )
    printed_lines, rows = predict_file(os.path.join(job, "model"), data["dev"], os.path.join(job, "dev.csv"))
    rate = float(re.search(r"predicted \d+ rows in .* \(([\d,.]+) rows/s\)", printed_lines).group(1).replace(",", ""))
    right = np.asarray([row["predicted_label"] == label for row, (_, label) in zip(rows, data["dev_rows"])])
    long_rows = np.asarray([len(text.split()) >= LONG_WORDS for text, _ in data["dev_rows"]])
    return {
        "model": model,
        "accuracy": float(right.mean()),
        "accuracy_10_words": float(right[long_rows].mean()),
        "dev_rows_10_words": int(long_rows.sum()),
        "train_seconds": metrics["durations"]["train"],
        "teacher_seconds": metrics["durations"].get("teacher", 0.0),
        "predict_texts_per_second": rate,
        "epochs": metrics["hyperparameters"]["epochs"],
        "best_epoch": metrics["best_epoch"],
        "validation": metrics["validation"],
        "distillation": metrics.get("distillation"),
    }


def report(results: dict, args, data: dict) -> str:
    base = results["student"]
    with printed() as text:
        print(
            f"bench/distill.py: {args.data}, teacher {args.teacher_encoder}, student "
            f"{args.student_layers or 'all'} layers of the default encoder, {args.train_rows} labelled rows (seeded), "
            f"{data['transfer']} unlabelled; scored on {len(data['dev_rows'])} held-out rows "
            f"({base['dev_rows_10_words']} of {LONG_WORDS}+ words); {machine()['cpus']} CPUs\n"
        )
        print(
            table(
                [
                    [
                        r["model"],
                        f"{r['accuracy']:.4f}",
                        f"{r['accuracy'] - base['accuracy']:+.4f}",
                        f"{r['accuracy_10_words']:.4f}",
                        f"{r['train_seconds']:.0f}",
                        f"{r['train_seconds'] / base['train_seconds']:.2f}",
                        f"{r['teacher_seconds']:.0f}",
                        f"{r['predict_texts_per_second']:.1f}",
                        f"{r['predict_texts_per_second'] / base['predict_texts_per_second']:.2f}",
                    ]
                    for r in results.values()
                ],
                [
                    "model",
                    "held-out acc",
                    "vs student",
                    f"{LONG_WORDS}+ words",
                    "train s",
                    "x student",
                    "teacher s",
                    "predict texts/s",
                    "x student",
                ],
            )
        )
        if args.teacher_job and "teacher" in results:
            print(
                f"\nthe teacher's row is of --teacher-job's run ({args.teacher_job}), trained outside "
                f"this run: its training time was not measured alone"
            )
        reused = [r["model"] for r in results.values() if r["distillation"] and r["teacher_seconds"] < 60]
        if reused:
            print(
                f"{', '.join(reused)}: the teacher's outputs came from its file, written once by an "
                f"earlier run of the same teacher and data (teacher s: reading it)"
            )
        if "teacher" in results and "distilled" in results:
            gap = results["teacher"]["accuracy"] - base["accuracy"]
            closed = (results["distilled"]["accuracy"] - base["accuracy"]) / gap if gap else float("nan")
            print(f"\nthe distilled student closes {closed:.0%} of the student's gap to the teacher")
    return text.getvalue()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("sst2-whole", "imdb"), default="sst2-whole")
    parser.add_argument(
        "--long-texts",
        choices=("truncate", "head-tail", "windows"),
        help="the trainer's --long-texts for every model (default: the trainer's)",
    )
    parser.add_argument("--train-rows", type=int, default=10_000)
    parser.add_argument("--transfer-rows", type=int, help="unlabelled rows to use (default: all)")
    parser.add_argument(
        "--models", default=",".join(MODELS), help="comma-separated, run in this order: " + ", ".join((*MODELS, *ASKED))
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--teacher-encoder",
        choices=(TEACHER, "default"),
        default=TEACHER,
        help="the teacher's encoder: 'default' is the trainer's (with --student-layers, "
        "a shallower student of the same encoder: a run hours shorter)",
    )
    parser.add_argument(
        "--student-layers", type=int, help="--encoder-layers of the student and the distilled student (default: all)"
    )
    parser.add_argument(
        "--teacher-job",
        help="a finished teacher run (all-mpnet-base-v2 on the same seeded rows) to use instead of training one",
    )
    add_publish_flag(parser)
    args = parser.parse_args()
    work = os.path.join(WORK, f"distill-{args.data}")
    os.makedirs(work, exist_ok=True)
    data = (sst2_whole if args.data == "sst2-whole" else imdb)(work, args.train_rows, args.transfer_rows, args.seed)
    results, jobs = {}, {}
    for model in [m for m in (*MODELS, *ASKED) if m in args.models.split(",")]:
        results[model] = run_model(work, model, data, jobs, args)
        r = results[model]
        # One line per finished model: a run cut short (hours on 2 cores) still shows its figures.
        print(
            f"bench/distill.py: {model} done: held-out acc {r['accuracy']:.4f} ({LONG_WORDS}+ words "
            f"{r['accuracy_10_words']:.4f}), train {r['train_seconds']:.0f}s, predict "
            f"{r['predict_texts_per_second']:.1f} texts/s",
            flush=True,
        )
    text = report(results, args, data)
    if args.publish:
        publish(
            "distill",
            {"machine": machine(), "args": vars(args), "results": results, "data_counts": data.get("counts")},
            text,
            part=args.data,
        )


if __name__ == "__main__":
    main()
