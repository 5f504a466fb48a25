"""`python -m trainer.pipeline run --local`: the pipeline on this machine, with kfp.local.

kfp.local's SubprocessRunner runs each step as `python -m kfp.dsl.executor_main` with this
interpreter (use_venv=False: this environment has the trainer and its dependencies, and nothing
is installed), in the pipeline's order, and honours `dsl.If`. Its task outputs go to a
temporary directory, removed afterwards; the training run is in the job dir as with
`trainer.task`. Register and deploy are `trainer.deploy --dry-run`: requests printed, none sent.
"""

import argparse
import contextlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence

from trainer.cloud import pipeline_components, pipeline_deploy, pipeline_gate
from trainer.vertex import api

ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def plan(
    options: argparse.Namespace, gate: pipeline_gate.Gate, job_dir: str, trainer_args: Sequence[str]
) -> pipeline_components.Plan:
    return pipeline_components.Plan(
        job_dir=os.path.abspath(job_dir),
        gate=str(gate),
        trainer_args=list(trainer_args),
        submit_args=[],
        deploy_args=pipeline_deploy.arguments(options, pipeline_deploy.local_where(options), job_dir, dry_run=True),
    )


def plain(text: str) -> str:
    """`text` without ANSI colour codes."""
    return ANSI_COLOUR.sub("", text)


class PlainMessages(logging.Filter):
    """Strips the colour codes kfp.local puts in its log messages themselves (task names,
    statuses: kfp/local/logging_utils.py, kfp 2.17, which has no setting to turn them off)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = plain(record.getMessage()), ()
        return True


@contextlib.contextmanager
def colours_for_terminals_only() -> Iterator[None]:
    """kfp.local's lines without colour codes unless stdout, where it logs, is a terminal: a
    redirected log gets plain text. The filter sits on the root logger, which kfp.local logs to;
    it replaces the logger's handlers for each message, but keeps its filters."""
    if sys.stdout.isatty():
        yield
        return
    root, plain_messages = logging.getLogger(), PlainMessages()
    root.addFilter(plain_messages)
    try:
        yield
    finally:
        root.removeFilter(plain_messages)


def run(local_plan: pipeline_components.Plan) -> int:
    """Runs the pipeline; exit code 0 when the gate passed and every step succeeded."""
    from kfp import local

    with tempfile.TemporaryDirectory(prefix="vbt-pipeline-") as root, colours_for_terminals_only():
        local.init(
            runner=local.SubprocessRunner(use_venv=False),
            pipeline_root=os.path.join(root, "outputs"),
            workspace_root=os.path.join(root, "workspace"),
            raise_on_error=True,
        )
        try:
            value = pipeline_components.build(local_plan)().output
        except RuntimeError as e:
            # kfp.local's "Pipeline 'NAME' finished with status FAILURE. Inner task failed: 'STEP'.",
            # coloured for a terminal; the step's own `error:` line is in its log above.
            raise api.CloudError(f"the local pipeline run failed: {plain(str(e))} (its log is above)") from None
    gate = pipeline_gate.parse(local_plan.gate)
    if not gate.passes(value):
        raise pipeline_gate.GateNotMet(gate.verdict(value))
    print(f"pipeline finished: {gate.verdict(value)}; the run is in {local_plan.job_dir}")
    return 0
