"""Benchmark: sentence-pair classification and sentence similarity against published figures.

    python bench/tasks.py --paraphrase-dir glue_data/MRPC --similarity-dir glue_data/STS-B
    python bench/tasks.py --similarity-dir glue_data/STS-B -- --learning-rate 5e-5   # trainer flags

Neither benchmark ships with this repository or ../shared/data, and nothing is downloaded: point
it at GLUE's MRPC and STS-B folders (each with train.tsv and dev.tsv, as GLUE distributes them).
Each is one real `python -m trainer.task` run with default flags apart from the task's columns,
--task and --epochs 3, trained on train.tsv and scored on dev.tsv (GLUE keeps its test labels).
It prints the validation F1 of the paraphrase class and the validation Spearman next to the
reference figures on GLUE's test sets, and writes bench/work/tasks-*.json.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

from common import WORK

# GLUE test-set figures the task issue compares with.
REFERENCES = {
    "paraphrase": {"metric": "F1 (paraphrase)", "BERT-Small": 83.4, "BERT-Medium": 86.6},
    "similarity": {"metric": "Spearman", "BERT-Small": 77.0, "TinyBERT-L4 cross-encoder": 85.5},
}
# GLUE's MRPC files: Quality<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String, Quality 1 = paraphrase.
PARAPHRASE_FLAGS = [
    "--text-column",
    "#1 String",
    "--text-pair-column",
    "#2 String",
    "--label-column",
    "Quality",
    "--label-type",
    "index",
    "--label-names",
    "different,paraphrase",
]
# GLUE's STS-B files: sentence1 and sentence2 are found as a pair, score as the label.
SIMILARITY_FLAGS = ["--task", "regression"]


def trainer_command(task: str, data_dir: str, job_dir: str, extra) -> list:
    flags = PARAPHRASE_FLAGS if task == "paraphrase" else SIMILARITY_FLAGS
    return [
        sys.executable,
        "-m",
        "trainer.task",
        "--training-file",
        os.path.join(data_dir, "train.tsv"),
        "--validation-file",
        os.path.join(data_dir, "dev.tsv"),
        "--job-dir",
        job_dir,
        "--epochs",
        "3",
        *flags,
        *extra,
    ]


def score(task: str, metrics: dict) -> float:
    """The benchmark's metric on the validation split, in percent."""
    validation = metrics["validation"]
    value = validation["per_class"]["paraphrase"]["f1"] if task == "paraphrase" else validation["spearman"]
    return 100 * value


def run_task(task: str, data_dir: str, work: str, extra) -> dict:
    job_dir = os.path.join(work, f"{task}-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    log_path = job_dir + ".log"
    print(f"[bench] {task}: training on {data_dir}/train.tsv (log: {log_path})", flush=True)
    start = time.perf_counter()
    with open(log_path, "w") as log:
        done = subprocess.run(trainer_command(task, data_dir, job_dir, extra), stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        with open(log_path) as log:
            sys.exit(f"{task}: the trainer exited {done.returncode}:\n{log.read()[-2000:]}")
    with open(os.path.join(job_dir, "metrics.json")) as f:
        metrics = json.load(f)
    return {
        "data_dir": data_dir,
        "job_dir": job_dir,
        "seconds": time.perf_counter() - start,
        "epochs": metrics["epochs_completed"],
        "best_epoch": metrics["best_epoch"],
        "validation_rows": metrics["dataset_sizes"]["validation"],
        "score": score(task, metrics),
    }


def print_table(results: dict) -> None:
    print(f"\n{'task':11s} {'metric':16s} {'ours (dev)':>10s}  references (GLUE test)")
    for task, result in results.items():
        reference = REFERENCES[task]
        others = ", ".join(f"{name} {value}" for name, value in reference.items() if name != "metric")
        print(f"{task:11s} {reference['metric']:16s} {result['score']:10.1f}  {others}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paraphrase-dir", help="GLUE's MRPC folder (train.tsv, dev.tsv)")
    parser.add_argument("--similarity-dir", help="GLUE's STS-B folder (train.tsv, dev.tsv)")
    parser.add_argument("--work-dir", default=WORK)
    parser.add_argument("trainer_flags", nargs="*", help="more trainer.task flags (after --)")
    args = parser.parse_args(argv)
    dirs = {"paraphrase": args.paraphrase_dir, "similarity": args.similarity_dir}
    if not any(dirs.values()):
        parser.error("give --paraphrase-dir and/or --similarity-dir (GLUE's MRPC, STS-B folders)")
    for task, data_dir in dirs.items():
        for name in ("train.tsv", "dev.tsv"):
            if data_dir and not os.path.isfile(os.path.join(data_dir, name)):
                parser.error(f"--{task}-dir: no {name} in {data_dir}")
    work = os.path.abspath(args.work_dir)
    os.makedirs(work, exist_ok=True)
    results = {task: run_task(task, data_dir, work, args.trainer_flags) for task, data_dir in dirs.items() if data_dir}
    print_table(results)
    path = os.path.join(work, f"tasks-{datetime.datetime.now():%Y%m%d-%H%M%S}.json")
    with open(path, "w") as f:
        json.dump({"flags": args.trainer_flags, "results": results}, f, indent=2)
    print(f"\nwrote {path}")
    return results


if __name__ == "__main__":
    main()
