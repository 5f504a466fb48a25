"""Benchmark (issue 66; not bench/onnx.py, which would shadow the onnx library for every process
with bench/ on its path): a model's ONNX copies against its SavedModel and LiteRT int8 copy, in one
run on one machine, on the same texts.

    python bench/onnx_copies.py [--parts short,long,tagging] [--texts 4000] [--onnx-python VENV/bin/python] [--publish]
    python bench/onnx_copies.py --parts short --model-dir JOB_DIR/model     # a model of your own on the short texts

For each part a model is trained once (bench/work/onnx/, resumed or reused by a rerun on the same
CPU) with every copy the run writes, then each copy the model dir holds is measured:
- rows/s, in this process, raw strings to the task's outputs (tokenizing included) through the
  package's own loader and batching (trainer.serving.variants.load, loaded_model.predict_outputs),
  after one untimed call; copies interleaved round by round, median of --rounds;
- agreement with the SavedModel on the same texts: the share of rows whose labels are equal (a
  tagger's: whose entities are, label, text and offsets), and the largest difference of a float
  output;
- process start to first prediction: `python -m trainer.predict` on a one-row file, wall time,
  median of 3; the ONNX copies also with --onnx-python, an environment without TensorFlow
  (`PYTHON=VENV/bin/python bash scripts/install.sh onnx`), as an ONNX server starts;
- trainer.serve at 1, 4 and 16 clients (one text per request), each copy its own server.

Parts: short (the default encoder fine-tuned on 8,000 GLUE SST-2 rows; the first --texts rows of
../shared/data/sst2/dev.tsv are timed), long (IMDB, --long-texts windows: 2,000 reviews trained,
500 dev reviews timed), tagging (WikiANN: 5,000 sentences trained, --texts dev sentences timed).
Speed only: one epoch each, quality is not the point. Nothing else should run meanwhile.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from common import ROOT, WORK, add_publish_flag, fmt, log, machine, printed, publish, table
from server_load import copy_flags, serve_rates

SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
COPIES = ("float32", "int8", "onnx", "onnx-int8")  # variants' names: runtime and precision
CLIENTS = (1, 4, 16)
BATCH_SIZE = 128  # trainer.predict's default --batch-size


def write_rows(path: str, header: list, rows) -> str:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def sst2(path: str) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return [(row["sentence"], row["label"]) for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def conll_sentences(path: str) -> list:
    """Each sentence of a CoNLL file as its words joined by spaces (a raw text for the tagger)."""
    sentences, words = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                words.append(line.split()[0])
            elif words:
                sentences.append(" ".join(words))
                words = []
    return sentences + ([" ".join(words)] if words else [])


def prepare(part: str, work: str, count: int) -> dict:
    """{train, validation, flags, texts}: the files a part trains on and the texts it times."""
    os.makedirs(work, exist_ok=True)
    if part == "short":
        train, dev = sst2(f"{SHARED}/sst2/train.tsv"), sst2(f"{SHARED}/sst2/dev.tsv")
        return {
            "train": write_rows(f"{work}/short-train.csv", ["text", "label"], train[:8000]),
            "validation": write_rows(f"{work}/short-val.csv", ["text", "label"], dev[count : count + 1000]),
            "flags": [],
            "texts": [text for text, _ in dev[:count]],
        }
    if part == "long":
        with open(f"{SHARED}/imdb/train.csv", newline="", encoding="utf-8") as f:
            train = [(r["text"], r["label"]) for _, r in zip(range(2000), csv.DictReader(f))]
        with open(f"{SHARED}/imdb/dev.csv", newline="", encoding="utf-8") as f:
            dev = [(r["text"], r["label"]) for _, r in zip(range(1000), csv.DictReader(f))]
        return {
            "train": write_rows(f"{work}/long-train.csv", ["text", "label"], train),
            "validation": write_rows(f"{work}/long-val.csv", ["text", "label"], dev[500:]),
            "flags": ["--long-texts", "windows"],
            "texts": [text for text, _ in dev[:500]],
        }
    texts = conll_sentences(f"{SHARED}/ner/wikiann_en_dev.conll")
    with open(f"{SHARED}/ner/wikiann_en_train.conll", encoding="utf-8") as f:
        blocks = f.read().strip().split("\n\n")
    with open(f"{work}/tagging-train.conll", "w", encoding="utf-8") as f:
        f.write("\n\n".join(blocks[:5000]) + "\n")
    return {
        "train": f"{work}/tagging-train.conll",
        "validation": f"{SHARED}/ner/wikiann_en_dev.conll",
        "flags": ["--task", "token-classification"],
        "texts": texts[:count],
    }


def trained(part: str, data: dict, work: str) -> str:
    """The part's model dir: trained by `python -m trainer.task` unless a finished run is there."""
    job = os.path.join(work, f"job-{part}")
    if not os.path.exists(os.path.join(job, "metrics.json")):
        log(f"{part}: training the model the copies are made of ({job})")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer.task",
                "--job-dir",
                job,
                "--training-file",
                data["train"],
                "--validation-file",
                data["validation"],
                "--epochs",
                "1",
                "--export-bfloat16",
                "off",
                "--report",
                "off",
                *data["flags"],
            ],
            check=True,
            cwd=ROOT,
        )
    return os.path.join(job, "model")


def held_copies(model_dir: str) -> list:
    from trainer.serving import variants

    held = variants.available(model_dir)
    return [copy for copy in COPIES if copy in held]


def throughput(model_dir: str, copies: list, texts: list, rounds: int) -> dict:
    """{copy: {rows_per_second, outputs}}: each copy's median over `rounds`, interleaved."""
    from trainer.inference import loaded_model
    from trainer.serving import variants

    models = {copy: variants.load(model_dir, copy) for copy in copies}
    outputs, seconds = {}, {copy: [] for copy in copies}
    for copy, model in models.items():  # untimed: graph optimization, sessions' first runs
        outputs[copy] = loaded_model.predict_outputs(model, texts[:256], BATCH_SIZE)
    for _ in range(rounds):
        for copy, model in models.items():
            start = time.perf_counter()
            outputs[copy] = loaded_model.predict_outputs(model, texts, BATCH_SIZE)
            seconds[copy].append(time.perf_counter() - start)
    return {
        copy: {"rows_per_second": len(texts) / statistics.median(seconds[copy]), "outputs": outputs[copy]}
        for copy in copies
    }


# A tagger's rows agree when every entity does: its label, text and character offsets (the bar).
ENTITIES = ("entity_count", "entity_label", "entity_text", "entity_start", "entity_end")


def agreement(reference: dict, candidate: dict) -> dict:
    """Rows whose labels (a tagger's: entities) are equal, and the largest difference of any float
    output, vs `reference`."""
    names = (
        ENTITIES
        if "entity_label" in reference
        else [next((name for name in ("label_index", "labels") if name in reference), None)]
    )
    rows = [
        np.all(
            [
                np.asarray(reference[n]).reshape(len(reference[n]), -1)
                == np.asarray(candidate[n]).reshape(len(candidate[n]), -1)
            ],
            axis=(0, 2),
        )
        for n in names
        if n is not None
    ]
    equal = float(np.mean(np.all(rows, axis=0))) if rows else None
    floats = [
        abs(np.asarray(reference[n], np.float64) - np.asarray(candidate[n], np.float64)).max()
        for n in reference
        if n in candidate
        and np.asarray(reference[n]).dtype.kind == "f"
        and np.shape(reference[n]) == np.shape(candidate[n])
    ]
    return {"labels_equal": equal, "max_difference": float(max(floats)) if floats else None}


def start_up(model_dir: str, copy: str, work: str, text: str, python: str) -> float:
    """Median wall seconds of 3 `python -m trainer.predict` runs on one row: start to exit."""
    one = write_rows(os.path.join(work, "one.csv"), ["text"], [[text]])
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(
            [
                python,
                "-m",
                "trainer.predict",
                "--model-dir",
                model_dir,
                "--input",
                one,
                "--output",
                os.path.join(work, "one-out.csv"),
                "--overwrite",
                *copy_flags(copy),
            ],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(part: str, args, work: str) -> dict:
    data = prepare(part, work, args.texts)
    model_dir = args.model_dir or trained(part, data, work)
    copies = held_copies(model_dir)
    log(f"{part}: {len(data['texts'])} texts, copies {', '.join(copies)}")
    speed = throughput(model_dir, copies, data["texts"], args.rounds)
    result = {"texts": len(data["texts"]), "copies": {}}
    for copy in copies:
        figures = {
            "rows_per_second": speed[copy]["rows_per_second"],
            **agreement(speed["float32"]["outputs"], speed[copy]["outputs"]),
            "start_seconds": start_up(model_dir, copy, work, data["texts"][0], sys.executable),
        }
        if copy.startswith("onnx") and args.onnx_python:
            figures["start_seconds_without_tensorflow"] = start_up(
                model_dir, copy, work, data["texts"][0], args.onnx_python
            )
        if part == "short":
            figures["serve"] = serve_rates(model_dir, work, data["texts"][: args.serve_texts], copy, CLIENTS)
        result["copies"][copy] = figures
    return result


def report(results: dict) -> str:
    lines = []
    for part, result in results.items():
        base = result["copies"]["float32"]
        litert = result["copies"].get("int8")
        rows = [
            [
                copy,
                fmt(f["rows_per_second"], ",.0f"),
                fmt(f["rows_per_second"] / base["rows_per_second"], ".2f") + "x",
                "-" if litert is None else fmt(f["rows_per_second"] / litert["rows_per_second"], ".2f") + "x",
                "-" if f["labels_equal"] is None else fmt(100 * f["labels_equal"], ".2f") + "%",
                fmt(f["max_difference"], ".1e"),
                fmt(f["start_seconds"], ".2f"),
                fmt(f.get("start_seconds_without_tensorflow"), ".2f"),
            ]
            for copy, f in result["copies"].items()
        ]
        lines += [
            f"\n{part}: {result['texts']} texts",
            table(
                rows,
                [
                    "copy",
                    "rows/s",
                    "x SavedModel",
                    "x LiteRT int8",
                    "rows equal",
                    "max diff",
                    "start s",
                    "start s (no TF)",
                ],
            ),
        ]
        served = [
            [copy, *[fmt(f["serve"][c]["examples_per_second"], ",.0f") for c in CLIENTS]]
            for copy, f in result["copies"].items()
            if "serve" in f
        ]
        if served:
            lines += [
                f"\n{part}: trainer.serve examples/s at {', '.join(map(str, CLIENTS))} clients",
                table(served, ["copy", *[f"{c} clients" for c in CLIENTS]]),
            ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="short,long,tagging")
    parser.add_argument("--texts", type=int, default=4000)
    parser.add_argument("--serve-texts", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model-dir", help="measure this model (one part) instead of training one")
    parser.add_argument("--onnx-python", help="a Python without TensorFlow (scripts/install.sh onnx)")
    add_publish_flag(parser)
    args = parser.parse_args()
    if args.model_dir and "," in args.parts:
        parser.error("--model-dir: name the one part it is measured on (--parts short, long or tagging)")
    work = os.path.join(WORK, "onnx")
    results = {part: measure(part, args, work) for part in args.parts.split(",")}
    with printed() as out:
        print(report(results))
    if args.publish:
        for result in results.values():
            for figures in result["copies"].values():
                figures.pop("outputs", None)
        publish("onnx_copies", {"results": results, "machine": machine()}, out.getvalue())


if __name__ == "__main__":
    main()
