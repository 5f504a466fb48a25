"""One trial of the local search: a `python -m trainer.task` process in its own job dir, and the
value of the selection metric it reached.

A trial is a process, not a function call, so that each one starts from a clean TensorFlow (no
memory, graph or precision policy left by the one before) and is exactly the run a user gets
from the command the search prints. Its job dir, SEARCH_DIR/trials/N, makes it resumable by the
trainer's own rules (trainer/training/jobdir.py): rerun with the same flags, an unfinished trial
goes on from its last checkpoint, and a finished one (metrics.json) is read, never rerun.

The trainer's progress lines are in the trial's training.log, so its stdout is dropped; its
stderr is appended to the trial's stderr.txt, whose last line says why a trial failed.
"""

import ctypes
import dataclasses
import functools
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

METRICS = "metrics.json"
STDERR = "stderr.txt"
# The exit statuses of a trainer stopped by Ctrl-C or SIGTERM (trainer.cli: 130). They stop the
# search too, leaving the trial to be resumed, rather than recording it as failed.
INTERRUPTED = (130, 128 + signal.SIGTERM, -signal.SIGINT, -signal.SIGTERM)  # 143: cli.Terminated
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
# What a trial skips of a run's artifacts: the search reads its metrics.json, never these, which
# took 26 of a 1-trial search's 38 s (issue 37). Last in its command, so they win over the
# user's own values; `trainer.tune --finish-best` writes them for the best trial (finish.py).
SKIPPED = ("--export-bfloat16", "off", "--export-int8", "off", "--export-onnx", "off", "--report", "off")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a trial reached: `value`, or None and `error`, the line that says why."""

    value: float | None
    error: str
    seconds: float


def trainer_command(trainer_args: Sequence[str], flags: Mapping[str, str], job_dir: str, cache_dir: str | None) -> list:
    """The trial's `python -m trainer.task` argv: the user's flags, then the trial's values and
    directories, then what a trial skips. `cache_dir` None: the user's trainer flags name one."""
    tuned = [f"--{name}={value}" for name, value in flags.items()]
    cache = ["--cache-dir", cache_dir] if cache_dir else []
    return [sys.executable, "-m", "trainer.task", *trainer_args, *tuned, "--job-dir", job_dir, *cache, *SKIPPED]


def run(command: Sequence[str], job_dir: str, metric: str) -> Outcome:
    """Runs the trial unless it finished already (the search was killed before recording it).

    Raises KeyboardInterrupt when the trainer was interrupted: the search stops there."""
    if os.path.exists(os.path.join(job_dir, METRICS)):
        return read_outcome(job_dir, metric)
    os.makedirs(job_dir, exist_ok=True)
    stderr_path = os.path.join(job_dir, STDERR)
    start_of_this_run = os.path.getsize(stderr_path) if os.path.exists(stderr_path) else 0
    started = time.monotonic()
    with open(stderr_path, "ab") as stderr:
        code = call(command, stderr)
    seconds = time.monotonic() - started
    if code in INTERRUPTED:
        raise KeyboardInterrupt
    if code != 0:
        why = last_line(stderr_path, start_of_this_run)
        return Outcome(None, why or _exit_status(code), seconds)
    return read_outcome(job_dir, metric, seconds)


def read_outcome(job_dir: str, metric: str, seconds: float | None = None) -> Outcome:
    """The validation value of `metric` in a finished trial's metrics.json: the value the trainer
    reports to Vertex tuning, of the exported (best) epoch (trainer/training/results.py).
    `seconds` None: the run's own total, for a trial that finished in an earlier search run."""
    with open(os.path.join(job_dir, METRICS), encoding="utf-8") as f:
        metrics = json.load(f)
    if seconds is None:
        seconds = float(metrics.get("durations", {}).get("total", 0.0))
    name = metric.removeprefix("val_")
    value = metrics.get("validation", {}).get(name)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return Outcome(None, f"{METRICS} has no finite validation {name} (got {value!r})", seconds)
    return Outcome(float(value), "", seconds)


def last_line(path: str, offset: int = 0) -> str:
    """The last non-blank line of `path` after `offset`, read from its last 64 KiB only."""
    with open(path, "rb") as f:
        f.seek(max(offset, os.path.getsize(path) - (1 << 16)))
        lines = f.read().decode("utf-8", errors="replace").splitlines()
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _exit_status(code: int) -> str:
    if code < 0:
        return f"the trainer was killed by {signal.Signals(-code).name}"
    return f"the trainer exited with status {code} and printed nothing on stderr"


def call(command: Sequence[str], stderr, stdout=subprocess.DEVNULL) -> int:
    """Runs `command` to its end and returns its exit status. A stop signal (Ctrl-C, SIGTERM:
    KeyboardInterrupt in the search) kills it and goes on up.

    The stop signals are held while the process starts: one arriving during the fork would run
    the search's handler inside Python's fork bookkeeping, which drops its exception, and the
    search would go on as if never stopped."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            preexec_fn=functools.partial(_start_trial, held),
        )
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    with process:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a signal held meanwhile arrives now
            return process.wait()
        except BaseException:
            process.kill()
            raise


def _start_trial(signal_mask) -> None:
    """In the trial's process, before the trainer starts: the search's signal mask back, and on
    Linux a SIGTERM when the search dies, even of SIGKILL, so that no orphaned trial goes on
    writing to a job dir the next search resumes. (Elsewhere such a trial runs to its end.)"""
    signal.pthread_sigmask(signal.SIG_SETMASK, signal_mask)
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
