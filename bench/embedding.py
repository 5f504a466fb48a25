"""Benchmark (issue 68): `--task embedding` against sentence-transformers' own trainer, the same
weights, the same scored pairs, one run on one machine.

    python bench/embedding.py [--epochs 4] [--batch-size 16] [--reference-precision float32] [--publish]

- the pairs: the shared STS-B training pairs (../shared/data/glue/stsb_train.csv), split by
  bench/embedding_reference.py so that no validation sentence occurs in a training pair (STS-B
  scores one sentence against several others); both sides train on its training file and are
  scored on its validation file (the official dev set is measured elsewhere);
- the reference: bench/embedding_reference.py, sentence-transformers' STS-B example recipe with
  CoSENTLoss (learning rate 5e-5 after a 10% warm-up, batch 16), the last epoch's weights, in
  float32 on the CPU (the example's fp16 is for GPUs; --reference-precision bfloat16: torch's
  bfloat16 autocast, which the trainer's mixed bfloat16 matches on a CPU with native bfloat16,
  but which trained sentence-transformers 0.94x as fast as float32 on a 2-core Xeon with AMX);
- the trainer: `python -m trainer.task --task embedding` at its defaults but --epochs and
  --batch-size, which are the reference's; its Spearman is its last epoch's (eval_history.csv),
  as the reference's is, and the epoch it keeps (the best on validation) is shown beside it;
- the score: Spearman of the cosine of each validation pair's vectors against its score, before
  training (zero-shot) and after; training seconds count the epochs alone on both sides.

Each side's run is kept under bench/work/embedding/ and reused by a rerun on the same CPU.
Nothing else should run meanwhile.
"""

import argparse
import csv
import json
import os
import sys

import embedding_reference
from common import ROOT, WORK, add_publish_flag, kept_here, log, printed, publish, table, train_once

STSB = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "glue", "stsb_train.csv"))
HERE = os.path.join(WORK, "embedding")


def reference(args, encoder: str) -> dict:
    """bench/embedding_reference.py's result (run now unless kept from this CPU)."""
    precision = args.reference_precision
    output = os.path.join(HERE, f"reference-{args.epochs}-{args.batch_size}-{precision}.json")
    kept_here(output)
    if not os.path.exists(output):
        log(f"sentence-transformers: {args.epochs} epochs, batch {args.batch_size}, {precision}")
        flags = ["--encoder", encoder, "--train", STSB, "--split-dir", HERE, "--output", output]
        flags += ["--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
        embedding_reference.main([*flags, *(["--bf16"] if precision == "bfloat16" else [])])
    with open(output) as f:
        return json.load(f)


def trainer_side(args, split: dict) -> dict:
    """The trainer's run on the reference's split: its metrics.json and eval_history.csv."""
    job = os.path.join(HERE, f"job-{args.epochs}-{args.batch_size}")
    log(f"trainer: --task embedding, {args.epochs} epochs, batch {args.batch_size}")
    files = ["--training-file", split["train_file"], "--validation-file", split["validation_file"]]
    flags = ["--task", "embedding", *files]
    metrics = train_once(job, [*flags, "--epochs", str(args.epochs), "--batch-size", str(args.batch_size)])
    with open(os.path.join(job, "eval_history.csv"), newline="") as f:
        history = list(csv.DictReader(f))
    return {"metrics": metrics, "history": history}


def compare(ours: dict, theirs: dict) -> dict:
    history = ours["history"]
    train_seconds = sum(float(row["seconds"]) for row in history)
    return {
        "trainer_zero_shot": ours["metrics"]["zero_shot"]["validation"]["spearman"],
        "trainer_spearman": float(history[-1]["val_spearman"]),
        "trainer_best_epoch": ours["metrics"]["best_epoch"],
        "trainer_best_spearman": ours["metrics"]["validation"]["spearman"],
        "trainer_train_seconds": train_seconds,
        "reference_zero_shot": theirs["zero_shot_spearman"],
        "reference_spearman": theirs["spearman"],
        "reference_train_seconds": theirs["train_seconds"],
        "reference_precision": theirs.get("precision", "float32"),
        "points": 100 * (float(history[-1]["val_spearman"]) - theirs["spearman"]),
        "faster": theirs["train_seconds"] / train_seconds,
    }


def report(result: dict, pairs: tuple) -> None:
    r = result
    print(f"\nSTS-B: {pairs[0]:,} training pairs, {pairs[1]:,} validation pairs (no validation sentence in training)")
    rows = [
        [side, f"{r[f'{key}_zero_shot']:.4f}", f"{r[f'{key}_spearman']:.4f}", f"{r[f'{key}_train_seconds']:.0f}"]
        for side, key in (("trainer", "trainer"), (f"sentence-transformers ({r['reference_precision']})", "reference"))
    ]
    print(table(rows, ["side", "zero-shot", "spearman", "train s"]))
    print(
        f"trainer - sentence-transformers: {r['points']:+.2f} points, {r['faster']:.2f}x faster; the trainer keeps "
        f"epoch {r['trainer_best_epoch']} (validation Spearman {r['trainer_best_spearman']:.4f})"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument(
        "--reference-precision",
        choices=("float32", "bfloat16"),
        default="float32",
        help="the reference's precision (bfloat16: torch's autocast)",
    )
    add_publish_flag(parser)
    args = parser.parse_args(argv)
    from trainer.modeling.encoders.registry import packaged_default_dir

    os.makedirs(HERE, exist_ok=True)
    theirs = reference(args, packaged_default_dir())
    ours = trainer_side(args, theirs)
    with printed() as text:
        result = compare(ours, theirs)
        report(result, (theirs["train_pairs"], theirs["validation_pairs"]))
    if args.publish:
        log(f"Results: {publish('embedding', {'result': result, 'reference': theirs}, text.getvalue())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
