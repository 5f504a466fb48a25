"""Benchmark (issue 68, item 5): an embedding student learning a teacher's vectors, against the
same student trained alone, one run on one machine.

    python bench/embedding_distill.py [--epochs 4] [--layers 3] [--distill-alpha 0.5] [--publish]

- the pairs: bench/embedding.py's split of the shared STS-B training pairs
  (bench/embedding_reference.py's: no validation sentence occurs in a training pair);
- two teachers: the default encoder fine-tuned on the training pairs (bench/embedding.py's run of
  the trainer, 6 layers, its export given as --teacher: a user's own larger run), and
  all-mpnet-base-v2 (bench/mpnet_weights.py, 768 numbers a vector) as sentence-transformers
  encodes it, untrained here, its unit vector of every training and validation sentence written as
  trainer.predict writes an embedding model's pairs and given as --teacher-probabilities (a file
  from any system; the student learns its 384 leading principal axes); each teacher's own
  validation Spearman is the score a student can close in on;
- the students: the default encoder cut to --layers layers (--encoder-layers), `--task embedding`
  on the training pairs, --epochs at batch 16, alone and with each teacher (--distill-alpha: 0.5,
  the trainer's default, is half CoSENT and half the distance to the teacher's vectors; 0, the
  teacher's vectors alone, is sentence-transformers' recipe);
- the score: Spearman of each student's cosines on the validation pairs (the epoch each keeps,
  the best on validation, as a user's run does), the points a teacher added and their share of
  the student's gap to that teacher.

Each run is kept under bench/work/embedding_distill/ and reused by a rerun on the same CPU.
Nothing else should run meanwhile.
"""

import argparse
import csv
import json
import os
import sys

import embedding
import embedding_reference
import mpnet_weights
from common import WORK, add_publish_flag, kept_here, log, printed, publish, table, train_once, write_json

HERE = os.path.join(WORK, "embedding_distill")


def split() -> tuple:
    """(training file, validation file) of bench/embedding.py's split (written now if absent)."""
    from trainer.modeling.encoders.registry import packaged_default_dir

    args = embedding_reference.arguments(
        ["--encoder", packaged_default_dir(), "--train", embedding.STSB, "--output", "-"]
    )
    args.split_dir = os.path.join(WORK, "embedding")
    train_file, validation_file, _ = embedding_reference.split(args)
    return train_file, validation_file


def pairs_of(path: str) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def mpnet_teacher(files: tuple) -> dict:
    """all-mpnet-base-v2's vectors of both files' sentences, in one CSV as trainer.predict writes
    an embedding model's pairs; and the teacher's own validation Spearman."""
    output = os.path.join(HERE, "teacher.csv")
    facts_path = os.path.join(HERE, "teacher.json")
    kept_here(output)
    if not os.path.exists(facts_path):
        import numpy as np
        from scipy.stats import spearmanr

        model, _ = embedding_reference.sentence_model(mpnet_weights.fetch(), None)
        rows = [row for path in files for row in pairs_of(path)]
        sentences = sorted({row[c] for row in rows for c in ("sentence1", "sentence2")})
        log(f"teacher: all-mpnet-base-v2 encodes {len(sentences):,} sentences")
        vectors = dict(zip(sentences, model.encode(sentences, batch_size=32, normalize_embeddings=True)))
        with open(output + ".partial", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["sentence1", "sentence2", "embedding", "pair_embedding"])
            for row in rows:
                pair = [json.dumps([round(float(x), 6) for x in vectors[row[c]]]) for c in ("sentence1", "sentence2")]
                writer.writerow([row["sentence1"], row["sentence2"], *pair])
        os.replace(output + ".partial", output)
        validation = pairs_of(files[1])
        cosines = [float(np.dot(vectors[r["sentence1"]], vectors[r["sentence2"]])) for r in validation]
        score = spearmanr(cosines, [float(r["score"]) for r in validation]).statistic
        write_json(facts_path, {"sentences": len(sentences), "validation_spearman": float(score)})
    with open(facts_path) as f:
        facts = json.load(f)
    return {"flag": "--teacher-probabilities", "source": output, "spearman": facts["validation_spearman"]}


def fine_tuned_teacher(args, files: tuple) -> dict:
    """bench/embedding.py's run of the trainer on the split (trained now if not kept)."""
    run = embedding.trainer_side(
        argparse.Namespace(epochs=args.epochs, batch_size=16), {"train_file": files[0], "validation_file": files[1]}
    )
    job = os.path.join(embedding.HERE, f"job-{args.epochs}-16")
    return {
        "flag": "--teacher",
        "source": os.path.join(job, "model"),
        "spearman": run["metrics"]["validation"]["spearman"],
    }


def student(args, files: tuple, name: str, teacher: dict | None) -> dict:
    flags = ["--task", "embedding", "--training-file", files[0], "--validation-file", files[1]]
    flags += ["--encoder-layers", str(args.layers), "--epochs", str(args.epochs), "--batch-size", "16"]
    if teacher:
        flags += [teacher["flag"], teacher["source"], "--distill-alpha", f"{args.distill_alpha:g}"]
    log(f"student: {args.layers} layers, {args.epochs} epochs, {name}")
    alpha = "" if not teacher or args.distill_alpha == 0.5 else f"-alpha{args.distill_alpha:g}"
    metrics = train_once(os.path.join(HERE, f"student-{args.layers}-{args.epochs}-{name}{alpha}"), flags)
    return {
        "zero_shot": metrics["zero_shot"]["validation"]["spearman"],
        "spearman": metrics["validation"]["spearman"],
        "best_epoch": metrics["best_epoch"],
        "train_seconds": metrics["durations"]["train"],
    }


def compare(teacher_spearman: float, alone: dict, taught: dict) -> dict:
    """A taught student beside the teacher and the student alone: the points the teacher added,
    and their share of the student's gap to it (None when the student alone is not below)."""
    gap = teacher_spearman - alone["spearman"]
    points = taught["spearman"] - alone["spearman"]
    return {
        "teacher_spearman": teacher_spearman,
        "taught": taught,
        "points": 100 * points,
        "gap_closed": points / gap if gap > 0 else None,
    }


TEACHERS = {
    "fine-tuned": "the default encoder fine-tuned (6 layers)",
    "mpnet": "all-mpnet-base-v2's vectors (untrained here)",
}


def report(result: dict) -> None:
    r = result
    print(f"\nSTS-B split: {r['train_pairs']:,} training pairs, {r['validation_pairs']:,} validation pairs")
    print(f"taught with --distill-alpha {r.get('distill_alpha', 0.5):g}")
    alone = r["alone"]
    rows = [[f"student alone, {r['layers']} layers", "", f"{alone['spearman']:.4f}", f"{alone['train_seconds']:.0f}"]]
    for key, name in TEACHERS.items():
        t = r["teachers"][key]
        s = t["taught"]
        rows.append([f"teacher: {name}", f"{t['teacher_spearman']:.4f}", "", ""])
        rows.append(["  the student taught by it", "", f"{s['spearman']:.4f}", f"{s['train_seconds']:.0f}"])
    print(table(rows, ["model", "teacher", "student", "train s"]))
    for key, name in TEACHERS.items():
        t = r["teachers"][key]
        closed = "" if t["gap_closed"] is None else f", {100 * t['gap_closed']:.0f}% of the student's gap to it"
        print(f"{name}: {t['points']:+.2f} points of Spearman{closed}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--distill-alpha", type=float, default=0.5, help="the taught students' (the trainer's default)")
    add_publish_flag(parser)
    args = parser.parse_args(argv)
    os.makedirs(HERE, exist_ok=True)
    files = split()
    teachers = {"fine-tuned": fine_tuned_teacher(args, files), "mpnet": mpnet_teacher(files)}
    alone = student(args, files, "alone", None)
    taught = {key: student(args, files, f"taught-{key}", teacher) for key, teacher in teachers.items()}
    with printed() as text:
        result = {"layers": args.layers, "epochs": args.epochs, "distill_alpha": args.distill_alpha, "alone": alone}
        result["teachers"] = {key: compare(teachers[key]["spearman"], alone, taught[key]) for key in teachers}
        result.update(train_pairs=len(pairs_of(files[0])), validation_pairs=len(pairs_of(files[1])))
        report(result)
    if args.publish:
        part = "" if args.distill_alpha == 0.5 else f"alpha{args.distill_alpha:g}"
        log(f"Results: {publish('embedding_distill', {'result': result}, text.getvalue(), part=part)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
