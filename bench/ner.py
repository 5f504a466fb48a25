"""Token classification against transformers' (issue #52): dev entity F1 and training time of the
trainer's `--task token-classification` run with default flags, and of transformers' PyTorch
token classification (bench/ner_reference.py) on the same weights, epochs, learning rate, batch
size and sequence length, each pair in one run on this machine.

    python bench/ner.py [--data wikiann,wnut17] [--encoders default,mpnet] [--publish]

- data: ../shared/data/ner: WikiANN English (20,000 training sentences, 10,000 dev; PER, ORG,
  LOC) and WNUT-17 (3,394 and 1,009; six emerging-entity types, social-media text);
- encoders: the default (all-MiniLM-L6-v2) and all-mpnet-base-v2 (bench/mpnet_weights.py);
- F1: entity-level, micro, seqeval's strict IOB2 rules, on dev, at the best epoch of each side
  by the same rule (the trainer keeps the best epoch's weights by dev F1; the reference is scored
  after each epoch and its best reported);
- training seconds: the epochs' training alone (the trainer's metrics.json durations.train;
  the reference's loop), not loading, tokenizing or evaluating;
- decay: the layer-wise learning-rate decay the trainer's defaults gave the run (1 is none, as in
  transformers' run).

The trainer's runs and the reference's results are kept in bench/work/ner/ and reused: a rerun
measures only what is missing, and a killed reference goes on from its last finished epoch on the
same CPU model (bench/ner_reference.py --checkpoint). Run it with nothing else running.
"""

import argparse
import json
import os
import subprocess
import sys

from common import HERE, ROOT, WORK, add_publish_flag, fmt, kept_here, machine, printed, publish, table, train_once

DATA = os.path.join(HERE, "..", "..", "shared", "data", "ner")
FILES = {
    "wikiann": ("wikiann_en_train.conll", "wikiann_en_dev.conll"),
    "wnut17": ("wnut17_train.conll", "wnut17_dev.conll"),
}
ENCODERS = ("default", "mpnet")


def encoder_dir(encoder: str) -> str:
    """The checkpoint both sides load: the packaged default's files, or all-mpnet-base-v2's."""
    if encoder == "mpnet":
        import mpnet_weights

        return mpnet_weights.fetch()
    from trainer.modeling.encoders import registry

    return registry.packaged_default_dir()


def ours(work: str, data: str, encoder: str) -> dict:
    train, dev = (os.path.join(DATA, name) for name in FILES[data])
    metrics = train_once(
        os.path.join(work, f"{data}-{encoder}"),
        [
            "--training-file",
            train,
            "--validation-file",
            dev,
            *(["--encoder", encoder_dir(encoder)] if encoder != "default" else []),
        ],
    )
    return {
        "f1": metrics["validation"]["f1"],
        "train_seconds": metrics["durations"]["train"],
        "epochs": metrics["epochs_completed"],
        "best_epoch": metrics["best_epoch"],
        "hyperparameters": metrics["hyperparameters"],
        "precision": metrics["device"]["precision"],
    }


def reference(work: str, data: str, encoder: str, settings: dict) -> dict:
    """bench/ner_reference.py's result with the trainer's run's settings (run once, kept)."""
    path = os.path.join(work, f"{data}-{encoder}-reference.json")
    kept_here(path)
    if not os.path.exists(path):
        train, dev = (os.path.join(DATA, name) for name in FILES[data])
        h = settings["hyperparameters"]
        subprocess.run(
            [
                sys.executable,
                os.path.join(HERE, "ner_reference.py"),
                "--encoder",
                encoder_dir(encoder),
                "--train",
                train,
                "--dev",
                dev,
                "--epochs",
                str(settings["epochs"]),
                "--learning-rate",
                str(h["learning_rate"]),
                "--batch-size",
                str(h["batch_size"]),
                "--max-length",
                str(h["max_seq_length"]),
                "--warmup-fraction",
                str(h["warmup_fraction"]),
                "--weight-decay",
                str(h["weight_decay"]),
                "--seed",
                str(h["seed"]),
                "--checkpoint",
                path[: -len(".json")],
                "--output",
                path,
            ],
            check=True,
            cwd=ROOT,
        )
    with open(path) as f:
        return json.load(f)


def report(results: dict) -> str:
    rows = []
    for (data, encoder), r in results.items():
        o, t = r["ours"], r["reference"]
        rows.append(
            [
                data,
                encoder,
                f"{o['hyperparameters']['layer_decay']:g}",
                fmt(o["f1"], ".4f"),
                fmt(t["f1"], ".4f"),
                fmt(100 * (o["f1"] - t["f1"]), "+.2f"),
                f"{o['train_seconds']:.0f}",
                f"{t['train_seconds']:.0f}",
                f"{t['train_seconds'] / o['train_seconds']:.2f}x",
            ]
        )
    text = table(
        rows, ["data", "encoder", "decay", "dev F1", "transformers F1", "points", "train s", "transformers s", "faster"]
    )
    print(text)
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=",".join(FILES), help="comma-separated: " + ", ".join(FILES))
    parser.add_argument("--encoders", default=",".join(ENCODERS), help="comma-separated: " + ", ".join(ENCODERS))
    add_publish_flag(parser)
    args = parser.parse_args()
    started_on = machine()  # its load average is the one at the start
    work = os.path.join(WORK, "ner")
    os.makedirs(work, exist_ok=True)
    results = {}
    with printed():
        for data in args.data.split(","):
            for encoder in args.encoders.split(","):
                mine = ours(work, data, encoder)
                results[(data, encoder)] = {"ours": mine, "reference": reference(work, data, encoder, mine)}
                r = results[(data, encoder)]
                print(
                    f"bench/ner.py: {data} {encoder} done: F1 {r['ours']['f1']:.4f} against {r['reference']['f1']:.4f}",
                    flush=True,
                )
        text = report(results)
    if args.publish:
        publish(
            "ner",
            {"machine": started_on, "args": vars(args), "results": {f"{d}/{e}": r for (d, e), r in results.items()}},
            text,
        )


if __name__ == "__main__":
    main()
