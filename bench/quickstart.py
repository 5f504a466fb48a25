"""The README's quick start, timed: `python -m trainer.task` on the embedded sample posts.

    python bench/quickstart.py

One real run with default flags apart from --keep-checkpoints all (so that what a finished run
deletes by default can be weighed; deleting takes no measurable time). It prints the wall time
from process start to exit, the test accuracy, and the job dir's size with and without
checkpoints/. The text and the JSON go to bench/results/ (bench/common.py: publish).
"""

import argparse
import json
import os
import shutil
import sys

from common import WORK, log, machine, printed, publish
from run import run_measured


def megabytes(path: str) -> float:
    return (
        sum(os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(path) for name in names) / 1e6
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", default=WORK, help="scratch: the job dir and its log")
    args = parser.parse_args()
    job_dir = os.path.join(os.path.abspath(args.work_dir), "jobs", "quickstart")
    shutil.rmtree(job_dir, ignore_errors=True)
    os.makedirs(os.path.dirname(job_dir), exist_ok=True)
    log(f"python -m trainer.task --job-dir {job_dir} --keep-checkpoints all")
    seconds, rss = run_measured(
        [sys.executable, "-m", "trainer.task", "--job-dir", job_dir, "--keep-checkpoints", "all"], f"{job_dir}.log"
    )
    with open(os.path.join(job_dir, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    total, checkpoints = megabytes(job_dir), megabytes(os.path.join(job_dir, "checkpoints"))
    info = machine()
    with printed() as text:
        print(f"\nbench/quickstart.py: {info['cpus']} CPUs ({info['cpu']}, native {info['native']})")
        print(
            f"quick start: {seconds:.0f} s from start to exit, peak RSS {rss:.0f} MiB; test accuracy "
            f"{metrics['test']['accuracy']:.3f} on {metrics['dataset_sizes']['test']} rows"
        )
        print(
            f"job dir: {total:.0f} MB with checkpoints/ ({checkpoints:.0f} MB), {total - checkpoints:.0f} MB "
            f"without (the default once a run has finished)"
        )
    publish(
        "quickstart",
        {
            "machine": info,
            "seconds": seconds,
            "peak_rss_mib": rss,
            "test_accuracy": metrics["test"]["accuracy"],
            "job_dir_mb": total,
            "checkpoints_mb": checkpoints,
        },
        text.getvalue(),
    )


if __name__ == "__main__":
    main()
