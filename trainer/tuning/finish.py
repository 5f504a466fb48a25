"""`trainer.tune --finish-best`: the best trial made a run like any `trainer.task` run, with what
every trial skips (trials.SKIPPED): the bfloat16, int8 and ONNX copies the trainer flags ask
for, and the report.

Each is written by the command that writes it for any finished run (`trainer.export_quantized`,
`trainer.report`), in a process of its own as trials are, so the search itself never loads
TensorFlow. What is there already is not written again: rerunning the search finishes only
what a stopped or failed finishing left out.
"""

import json
import logging
import os
import sys
from collections.abc import Sequence

from trainer import config as config_lib
from trainer import hardware
from trainer.serving import variants
from trainer.tuning import trials

log = logging.getLogger("trainer")

REPORT = "report.html"  # written last by trainer.report: there, the report is complete


def copies_wanted(config: config_lib.Config, platform: str, cpu_bf16: bool) -> list:
    """The copies `config`'s trainer would have written on the machine the trial ran on
    (`platform`: its metrics.json's device), by the rules of trainer/training/results.py. On a
    GPU, whose compute capability only TensorFlow reads, bfloat16 'auto' writes nothing: give
    --export-bfloat16 on to have it."""
    runtime, hub = config.runtime, config.model.encoder_backend == "hub"
    native_bf16 = platform == "tpu" or (platform == "cpu" and cpu_bf16)
    wanted = []
    if runtime.export_bfloat16 == "on" or (runtime.export_bfloat16 == "auto" and native_bf16 and not hub):
        wanted.append("bfloat16")
    if runtime.export_int8 == "on" or (runtime.export_int8 == "auto" and not hub):
        wanted.append("int8")
    converts = not hub and not config.model.preprocessor
    if runtime.export_onnx == "on" or (runtime.export_onnx == "auto" and converts):
        wanted += ["onnx", "onnx-int8"]  # the int8 one is quantized from the float32 one
    return wanted


def missing_steps(job_dir: str, config: config_lib.Config, cpuinfo: str) -> list:
    """[(what, command)] still to run for the finished trial in `job_dir`: its copies, then its
    report (whose model card is written after the copies it could mention)."""
    model_dir = os.path.join(job_dir, "model")
    platform = _read_json(os.path.join(job_dir, trials.METRICS)).get("device", {}).get("platform", "cpu")
    written = _read_json(os.path.join(model_dir, variants.MANIFEST))
    steps = [
        (
            f"{precision} copy",
            [sys.executable, "-m", "trainer.export_quantized", "--model-dir", model_dir, "--precision", precision],
        )
        for precision in copies_wanted(config, platform, hardware.cpu_has_native_bf16(cpuinfo))
        if precision not in written
    ]
    if not os.path.exists(os.path.join(job_dir, REPORT)):
        steps.append(("report", [sys.executable, "-m", "trainer.report", "--job-dir", job_dir]))
    return steps


def finish(job_dir: str, trial: int, config: config_lib.Config) -> list:
    """Runs the missing steps of trial `trial` in `job_dir`, their progress lines on stdout and
    their stderr appended to the trial's stderr.txt; returns the failures' lines ([] when all
    went well). A copy refused by its check is not a failure, as in a trainer run: its own line
    says why it was not written."""
    steps = missing_steps(job_dir, config, hardware.read_cpuinfo())
    if not steps:
        log.info("trial %d is finished already: its report and copies are in %s", trial, job_dir)
        return []
    log.info("finishing trial %d (--finish-best): its %s", trial, _and(what for what, _ in steps))
    stderr_path = os.path.join(job_dir, trials.STDERR)
    failures = []
    for what, command in steps:
        start = os.path.getsize(stderr_path) if os.path.exists(stderr_path) else 0
        with open(stderr_path, "ab") as stderr:
            sys.stdout.flush()
            code = trials.call(command, stderr, stdout=None)
        if code in trials.INTERRUPTED:
            raise KeyboardInterrupt
        refused = code == 1 and what.endswith(" copy")  # trainer.export_quantized: check failed
        if code != 0 and not refused:
            failures.append(f"trial {trial}'s {what}: {trials.last_line(stderr_path, start) or f'exit status {code}'}")
    if not failures:
        log.info("trial %d finished: %s", trial, job_dir)
    return failures


def _read_json(path: str) -> dict:
    """The file's object, {} when there is none. With os, not variants.read_manifest: trainer.storage
    reads through TensorFlow's gfile, which the search never loads (a trial is local)."""
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _and(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
