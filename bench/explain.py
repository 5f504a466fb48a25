"""Issue 39's attribution bars on SST-2: do integrated gradients add up, at what cost per text,
and which words does a default model key on?

A model trained with the trainer's defaults (the default encoder, epochs and export copies) on
a seeded sample of --train-rows of ../shared/data/sst2/train.tsv (2 cores would take hours on
all 67k), validated on all of dev.tsv. Then, on dev:

- completeness against --ig-steps: the share of rows whose attributions sum to the output minus
  the baseline's output within 5%, the median relative gap, and seconds per text, for the
  float32 model and, when the run wrote one, the bfloat16 copy;
- the most-attributed words per predicted class, over a seeded sample of --words-rows dev rows
  at --words-steps: the words with the largest summed attribution toward the class, with how
  often each occurs.

Completeness is measured at fixed steps (no row integrated again) and as trainer.explain
computes it (a row that misses 5% is integrated again with twice the steps, up to 8x).

    python bench/explain.py [--train-rows 6000] [--steps 8,16,32,64] [--rows 200] [--publish]

The run's job dir stays in bench/work/explain/ and is reused when it holds a finished run;
its weights are exported again by this version (and its bfloat16 copy checked again), so the
figures are those of the current explain_tokens whichever version trained the model.
"""

import argparse
import collections
import os
import subprocess
import sys
import time

import numpy as np
from common import WORK, add_publish_flag, fmt, machine, printed, publish, read_sst2_tsv, table, write_sst2_tsv

HERE = os.path.dirname(os.path.abspath(__file__))
SST2 = os.path.join(HERE, "..", "..", "shared", "data", "sst2")
FLAGS = [
    "--text-column",
    "sentence",
    "--label-column",
    "label",
    "--label-type",
    "index",
    "--label-names",
    "negative,positive",
]


def trained_model(work: str, train_rows: int, seed: int) -> tuple:
    """(job dir, dev texts, dev labels): trains once, reuses a finished run."""
    job_dir = os.path.join(work, "job")
    dev = read_sst2_tsv(os.path.join(SST2, "dev.tsv"))
    if not os.path.exists(os.path.join(job_dir, "metrics.json")):
        train = read_sst2_tsv(os.path.join(SST2, "train.tsv"))
        rng = np.random.default_rng(seed)
        write_sst2_tsv(
            os.path.join(work, "train.tsv"),
            [train[i] for i in np.sort(rng.choice(len(train), train_rows, replace=False))],
        )
        write_sst2_tsv(os.path.join(work, "dev.tsv"), dev)
        command = [
            sys.executable,
            "-m",
            "trainer.task",
            "--training-file",
            os.path.join(work, "train.tsv"),
            "--validation-file",
            os.path.join(work, "dev.tsv"),
            "--job-dir",
            job_dir,
            "--overwrite",
            *FLAGS,
        ]
        print(f"[bench] {' '.join(command)}", flush=True)
        with open(os.path.join(work, "train.log"), "w") as log:
            subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)
    return job_dir, [text for text, _ in dev], np.asarray([int(label) for _, label in dev])


def exported_again(job_dir: str, target: str) -> str:
    """`target`: the run's weights exported by this version, with its checked bfloat16 copy
    (trainer.export_quantized's way of rebuilding a finished run's classifier)."""
    from trainer.serving import export, quantize
    from trainer.training import results
    from trainer.training.checked_copies import run_context

    model_dir = os.path.join(job_dir, "model")
    ctx = run_context(model_dir, job_dir)
    reference = export.load_module(model_dir)
    variables = reference.classifier_variables
    preprocessor, model = quantize.classifier_with(lambda: results._classifier(ctx), variables, "float32")
    labels = ctx.datasets.labels
    export.export(
        quantize.module_like(
            reference,
            preprocessor,
            model,
            ctx.task.name,
            labels.names,
            ctx.config.data.max_seq_length,
            False,
            labels.separator,
        ),
        target,
    )
    results.write_copy(ctx, target, variables, "bfloat16")
    return target


def completeness(model, texts, steps: int, factor: int) -> dict:
    """Completeness at `steps`, rows integrated again up to `factor` x steps (1: never)."""
    from trainer.explaining import attribute

    attribute.explain_texts(model, texts[:2], steps=steps)  # traces and warms up, untimed
    start = time.perf_counter()
    explained = [e for row in attribute.explain_texts(model, texts, steps=steps, max_steps_factor=factor) for e in row]
    seconds = time.perf_counter() - start
    gaps = np.asarray([e.completeness_error for e in explained])
    return {
        "steps": steps,
        "raised_up_to": factor * steps,
        "rows": len(explained),
        "within_5pct": float(np.mean(gaps <= 0.05)),
        "median_gap": float(np.median(gaps)),
        "p95_gap": float(np.quantile(gaps, 0.95)),
        "mean_steps": float(np.mean([e.steps for e in explained])),
        "seconds_per_text": seconds / len(texts),
    }


def top_words(model, texts, steps: int, per_class: int, min_count: int) -> dict:
    """{class: [(word, summed attribution, count, mean)]}: largest summed attribution first."""
    from trainer.explaining import attribute

    sums, counts = collections.defaultdict(float), collections.Counter()
    for row in attribute.explain_texts(model, texts, steps=steps):
        for e in row:
            for word in e.words:
                sums[e.target, word.text.lower()] += word.weight
                counts[e.target, word.text.lower()] += 1
    out = collections.defaultdict(list)
    for (label, word), total in sorted(sums.items(), key=lambda item: -item[1]):
        if counts[label, word] >= min_count and len(out[label]) < per_class:
            out[label].append((word, total, counts[label, word], total / counts[label, word]))
    return dict(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-rows", type=int, default=6000)
    parser.add_argument("--steps", default="8,16,32,64", help="--ig-steps values to measure")
    parser.add_argument("--rows", type=int, default=200, help="dev rows (seeded sample) per measurement")
    parser.add_argument("--words-steps", type=int, default=32, help="steps of the words table")
    parser.add_argument("--words-rows", type=int, default=1000, help="dev rows of the words table")
    parser.add_argument("--per-class", type=int, default=15)
    parser.add_argument("--min-count", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    add_publish_flag(parser)
    args = parser.parse_args()
    work = os.path.join(WORK, "explain")
    os.makedirs(work, exist_ok=True)
    sys.path.insert(0, os.path.dirname(HERE))
    import trainer

    job_dir, texts, labels = trained_model(work, args.train_rows, args.seed)
    trainer.import_tensorflow()
    from trainer.serving import export

    model_dir = exported_again(job_dir, os.path.join(work, "model"))

    rng = np.random.default_rng(args.seed)
    sample = [texts[i] for i in np.sort(rng.choice(len(texts), min(args.rows, len(texts)), replace=False))]
    words_sample = [texts[i] for i in np.sort(rng.choice(len(texts), min(args.words_rows, len(texts)), replace=False))]
    models = {"float32": model_dir}
    if os.path.exists(os.path.join(model_dir, "bfloat16", "saved_model.pb")):
        models["bfloat16"] = os.path.join(model_dir, "bfloat16")
    measured = []
    for precision, path in models.items():
        model = export.load_module(path)
        for steps in [int(s) for s in args.steps.split(",")]:
            for factor in (1, 8):
                measured.append({"precision": precision, **completeness(model, sample, steps, factor)})
                print(f"[bench] {measured[-1]}", flush=True)
    model = export.load_module(models["float32"])
    words = top_words(model, words_sample, args.words_steps, args.per_class, args.min_count)
    import json

    with open(os.path.join(job_dir, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    info = machine()
    with printed() as text:
        print(
            f"\nbench/explain.py: {info['cpus']} CPUs ({info['cpu']}, native {info['native']}); "
            f"a default run on {metrics['dataset_sizes']['train']} SST-2 training rows, dev "
            f"accuracy {metrics['validation']['accuracy']:.3f}"
        )
        print(
            f"\nCompleteness on {len(sample)} dev rows (attributions within 5% of the output minus the baseline's):\n"
        )
        print(
            table(
                [
                    [
                        m["precision"],
                        str(m["steps"]),
                        str(m["raised_up_to"]),
                        f"{100 * m['within_5pct']:.1f}%",
                        fmt(m["median_gap"], ".4f"),
                        fmt(m["p95_gap"], ".4f"),
                        fmt(m["mean_steps"], ".1f"),
                        fmt(1000 * m["seconds_per_text"], ".0f"),
                    ]
                    for m in measured
                ],
                [
                    "model",
                    "steps",
                    "raised up to",
                    "rows within 5%",
                    "median gap",
                    "95th pct gap",
                    "mean steps",
                    "ms/text",
                ],
            )
        )
        for label, rows in words.items():
            print(
                f"\nMost-attributed words toward '{label}' ({len(words_sample)} dev rows, "
                f"{args.words_steps} steps, words seen at least {args.min_count} times):\n"
            )
            print(
                table(
                    [[word, f"{total:.3f}", str(count), f"{mean:.4f}"] for word, total, count, mean in rows],
                    ["word", "summed attribution", "count", "mean"],
                )
            )
    result = {
        "machine": info,
        "train_rows": metrics["dataset_sizes"]["train"],
        "dev_accuracy": metrics["validation"]["accuracy"],
        "completeness": measured,
        "top_words": words,
    }
    if args.publish:
        publish("explain", result, text.getvalue())


if __name__ == "__main__":
    main()
