"""What each pipeline step does, as plain functions; trainer/cloud/pipeline_components.py wraps
each in a KFP component whose body only imports this module and calls one of them.

Keeping the work here, not in the components' shipped source, means one copy of it, tested
without KFP, and the same code locally (kfp.local) and on Vertex AI Pipelines (the trainer
image). A step that fails prints the trainer's one `error:` line and exits with its code, so the
pipeline marks the task failed without a traceback.
"""

import json
import subprocess
import sys
from collections.abc import Sequence

from trainer import cli, storage
from trainer.cloud import pipeline_gate as gate_lib
from trainer.errors import UserError


def _exit_on_error(code: int) -> None:
    if code:
        raise SystemExit(code)


def train(job_dir: str, submit_args: Sequence[str], trainer_args: Sequence[str]) -> str:
    """Trains into `job_dir`: with `submit_args`, a Vertex AI custom job of the trainer image
    (`trainer.submit train`, which follows the job until it ends); without, `trainer.task` on
    this machine. Returns the job dir, where the run's metrics.json is."""
    if submit_args:
        run_module("trainer.submit", ["train", *submit_args, "--job-dir", job_dir, "--", *trainer_args])
    else:
        run_module("trainer.task", ["--job-dir", job_dir, *trainer_args])
    return job_dir


def read_metrics(job_dir: str) -> tuple:
    """(metrics.json's content, its path); a missing or unreadable file is a UserError."""
    path = storage.join(job_dir, "metrics.json")
    if not storage.exists(path):
        raise UserError(f"{path}: not found; the training step did not finish a run there")
    try:
        return json.loads(storage.read_text(path)), path
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None


def metric_value(job_dir: str, gate: str) -> float:
    """The gated metric's value in the run's metrics.json."""
    parsed = gate_lib.parse(gate)
    try:
        metrics, path = read_metrics(job_dir)
        value = parsed.value_in(metrics, path)
    except UserError as error:
        cli.fail(str(error))
        raise SystemExit(error.exit_code) from None
    print(f"{parsed.name} = {value:.6g} ({path})", flush=True)
    return value


def passes(value: float, gate: str) -> bool:
    """Prints the verdict; True when register and deploy should run."""
    parsed = gate_lib.parse(gate)
    print(parsed.verdict(value), flush=True)
    return parsed.passes(value)


def register_and_deploy(job_dir: str, args: Sequence[str]) -> None:
    """trainer.deploy for the run in `job_dir` (trainer/cloud/pipeline_deploy.py builds `args`)."""
    run_module("trainer.deploy", [*args, "--job-dir", job_dir])


def run_module(module: str, args: Sequence[str]) -> None:
    """`python -m MODULE ARGS` with this interpreter (its output is the step's log); a failure
    fails the step with the module's exit code (its `error:` line is already printed)."""
    print(f"$ python -m {module} {' '.join(args)}", flush=True)
    _exit_on_error(subprocess.run([sys.executable, "-m", module, *args], check=False).returncode)
