"""Distilling a tagger (issue #52, Build 5): a large teacher's entity F1 at a small tagger's cost,
in one run, as bench/distill.py measures it for sentence classification.

WikiANN English from ../shared/data/ner: a seeded --train-rows of wikiann_en_train.conll's
20,000 sentences are the tagged data; --transfer-rows of the rest, tags dropped, are the
unlabelled transfer set (JSON Lines of tokens); wikiann_en_dev.conll is the validation file every run is scored on, as
bench/ner.py scores. Four models, each at the trainer's defaults otherwise (no checked copies):

- teacher: all-mpnet-base-v2 (bench/mpnet_weights.py, sha256-checked) on the tagged sentences;
- student: the default encoder on the tagged sentences alone;
- distilled: the default encoder taught by the teacher (--teacher) on the tagged and
  unlabelled sentences;
- distilled-3: the same with --encoder-layers 3, from the distilled run's teacher file
  (--teacher-probabilities: the teacher tags the sentences once).

    python bench/ner_distill.py [--train-rows 5000] [--transfer-rows 5000] [--models ...] [--publish]

Figures per model: dev entity F1 (micro, strict IOB2, at the best epoch by dev F1, as
bench/ner.py's), the run's training seconds (metrics.json durations.train; the teacher's tagging
of every sentence is durations.teacher, shown apart), and trainer.predict's rate on the dev
sentences as raw strings (float32 export), each also as a ratio to the student's. Job dirs are
kept in bench/work/ner-distill/ by model and settings: a rerun resumes or reuses them. Run it
with nothing else running.
"""

import argparse
import json
import os
import re

import numpy as np
from common import WORK, add_publish_flag, machine, predict_file, printed, publish, table, train_once

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data", "ner")
MODELS = ("student", "teacher", "distilled", "distilled-3")


def conll(path: str) -> list:
    """Sentences of a CoNLL file, each a list of (token, tag)."""
    sentences, words = [], []
    with open(path, encoding="utf-8") as f:
        for line in [*f.read().splitlines(), ""]:
            columns = line.split()
            if columns:
                words.append((columns[0], columns[-1]))
            elif words:
                sentences.append(words)
                words = []
    return sentences


def wikiann(work: str, train_rows: int, transfer_rows: int, seed: int) -> dict:
    """Paths of the tagged sentences, the unlabelled ones and the dev texts, written once."""
    sentences = conll(os.path.join(DATA, "wikiann_en_train.conll"))
    order = np.random.default_rng(seed).permutation(len(sentences))
    tagged = [sentences[i] for i in np.sort(order[:train_rows])]
    rest = [sentences[i] for i in np.sort(order[train_rows : train_rows + transfer_rows])]
    paths = {
        name: os.path.join(work, f"{name}-{train_rows}-{transfer_rows}-s{seed}.{suffix}")
        for name, suffix in (("train", "conll"), ("unlabeled", "jsonl"))
    }
    with open(paths["train"], "w", encoding="utf-8") as f:
        f.write("".join("".join(f"{token}\t{tag}\n" for token, tag in s) + "\n" for s in tagged))
    with open(paths["unlabeled"], "w", encoding="utf-8") as f:
        f.write("".join(json.dumps({"tokens": [token for token, _ in s]}) + "\n" for s in rest))
    dev = os.path.join(DATA, "wikiann_en_dev.conll")
    texts = os.path.join(work, "dev-texts.jsonl")
    with open(texts, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps({"text": " ".join(t for t, _ in s)}) + "\n" for s in conll(dev)))
    return {**paths, "dev": dev, "dev_texts": texts, "transfer": len(rest)}


def model_flags(model: str, data: dict, jobs: dict) -> list:
    if model == "teacher":
        import mpnet_weights

        return ["--encoder", mpnet_weights.fetch()]
    if model == "distilled":
        return ["--teacher", os.path.join(jobs["teacher"], "model"), "--unlabeled-file", data["unlabeled"]]
    if model == "distilled-3":
        with open(os.path.join(jobs["distilled"], "metrics.json")) as f:
            teacher_file = json.load(f)["distillation"]["teacher_file"]
        return ["--teacher-probabilities", teacher_file, "--unlabeled-file", data["unlabeled"], "--encoder-layers", "3"]
    return []


def run_model(work: str, model: str, data: dict, jobs: dict, args) -> dict:
    job = jobs[model] = os.path.join(work, f"job-{model}-{args.train_rows}-{args.transfer_rows}-s{args.seed}")
    metrics = train_once(
        job, ["--training-file", data["train"], "--validation-file", data["dev"], *model_flags(model, data, jobs)]
    )
    printed_lines, _ = predict_file(
        os.path.join(job, "model"), data["dev_texts"], os.path.join(job, "dev-entities.csv")
    )
    rate = float(re.search(r"predicted \d+ rows in .* \(([\d,.]+) rows/s\)", printed_lines).group(1).replace(",", ""))
    return {
        "model": model,
        "f1": metrics["validation"]["f1"],
        "train_seconds": metrics["durations"]["train"],
        "teacher_seconds": metrics["durations"].get("teacher", 0.0),
        "predict_sentences_per_second": rate,
        "epochs": metrics["hyperparameters"]["epochs"],
        "best_epoch": metrics["best_epoch"],
        "distillation": metrics.get("distillation"),
    }


def report(results: dict, args, data: dict) -> str:
    base = results["student"]
    with printed() as text:
        print(
            f"bench/ner_distill.py: WikiANN, {args.train_rows} tagged sentences (seeded), "
            f"{data['transfer']} unlabelled; dev entity F1; {machine()['cpus']} CPUs\n"
        )
        print(
            table(
                [
                    [
                        r["model"],
                        f"{r['f1']:.4f}",
                        f"{100 * (r['f1'] - base['f1']):+.2f}",
                        f"{r['train_seconds']:.0f}",
                        f"{r['train_seconds'] / base['train_seconds']:.2f}",
                        f"{r['teacher_seconds']:.0f}",
                        f"{r['predict_sentences_per_second']:.1f}",
                        f"{r['predict_sentences_per_second'] / base['predict_sentences_per_second']:.2f}",
                    ]
                    for r in results.values()
                ],
                [
                    "model",
                    "dev F1",
                    "points vs student",
                    "train s",
                    "x student",
                    "teacher s",
                    "predict sentences/s",
                    "x student",
                ],
            )
        )
        if "teacher" in results and "distilled" in results:
            gap = results["teacher"]["f1"] - base["f1"]
            closed = (results["distilled"]["f1"] - base["f1"]) / gap if gap else float("nan")
            print(f"\nthe distilled student closes {closed:.0%} of the student's gap to the teacher")
    return text.getvalue()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-rows", type=int, default=5_000)
    parser.add_argument(
        "--transfer-rows", type=int, default=5_000, help="unlabelled sentences, of the 20,000 - --train-rows left"
    )
    parser.add_argument(
        "--models", default=",".join(MODELS), help="comma-separated, run in this order: " + ", ".join(MODELS)
    )
    parser.add_argument("--seed", type=int, default=0)
    add_publish_flag(parser)
    args = parser.parse_args()
    work = os.path.join(WORK, "ner-distill")
    os.makedirs(work, exist_ok=True)
    data = wikiann(work, args.train_rows, args.transfer_rows, args.seed)
    results, jobs = {}, {}
    for model in [m for m in MODELS if m in args.models.split(",")]:
        results[model] = r = run_model(work, model, data, jobs, args)
        print(
            f"bench/ner_distill.py: {model} done: dev F1 {r['f1']:.4f}, train {r['train_seconds']:.0f}s, "
            f"predict {r['predict_sentences_per_second']:.1f} sentences/s",
            flush=True,
        )
    text = report(results, args, data)
    if args.publish:
        publish("ner_distill", {"machine": machine(), "args": vars(args), "results": results}, text)


if __name__ == "__main__":
    main()
