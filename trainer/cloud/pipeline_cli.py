"""`python -m trainer.pipeline {compile,run}`: the flags, checked up front, and what each command does.

Everything a pipeline run could fail on before spending money is checked here, before KFP
compiles anything: the gate's shape and that the run computes its split and metric, the trainer
arguments (the trainer's own parser), and for Vertex the whole training job (trainer.submit
builds it offline, as its --dry-run does).
"""

import argparse
import datetime
import os
from collections.abc import Sequence

from trainer import cli
from trainer import config as config_lib
from trainer.cloud import pipeline_deploy, pipeline_gate, pipeline_local, pipeline_vertex
from trainer.cloud.pipeline_deploy import flag_value
from trainer.cloud.pipeline_vertex import SUBMIT_FLAGS
from trainer.errors import UserError
from trainer.training import jobdir
from trainer.vertex import api

VERTEX_FLAGS = ("--project", "--region", "--bucket", "--image-uri", "--serving-image-uri")


def build_arg_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--gate",
        required=True,
        metavar="SPLIT.METRIC_OP_THRESHOLD",
        help=f"Register and deploy only when the run's metrics.json passes this, e.g. "
        f"{pipeline_gate.EXAMPLE!r} or 'test.macro_f1>=0.80'; OP one of "
        f"{', '.join(pipeline_gate.OPERATORS)}. A gate not met ends the command "
        f"with exit code 1.",
    )
    common.add_argument(
        "--job-dir",
        help="The training run's directory (default: runs/pipeline-TIMESTAMP "
        "locally, gs://BUCKET/vertex-bert-trainer/DISPLAY_NAME on Vertex).",
    )
    common.add_argument("--display-name", help="Pipeline run name (default: vbt-pipeline-TIMESTAMP).")
    vertex = common.add_argument_group("Vertex AI (compile, and run without --local)")
    vertex.add_argument("--project", help="Google Cloud project id.")
    vertex.add_argument("--region", help="Vertex AI region, e.g. us-central1.")
    vertex.add_argument(
        "--bucket",
        help="Cloud Storage bucket (name or gs://BUCKET[/PREFIX]) for the pipeline root, staging and the job dir.",
    )
    vertex.add_argument("--image-uri", help="The trainer image (scripts/build-image.sh): every step runs in it.")
    vertex.add_argument(
        "--serving-image-uri",
        help="The serving image the registered model runs in (VARIANT=serve scripts/build-image.sh).",
    )
    vertex.add_argument("--service-account", help="Service account the pipeline and its jobs run as.")
    job = common.add_argument_group("the training job on Vertex AI (as `python -m trainer.submit train`)")
    for flag in SUBMIT_FLAGS:
        job.add_argument(flag, help="As trainer.submit train's (python -m trainer.submit train --help).")
    pipeline_deploy.add_arguments(common.add_argument_group("register and deploy (as `python -m trainer.deploy`)"))

    parser = cli.ArgumentParser(
        prog="python -m trainer.pipeline",
        description="A KFP v2 pipeline: train -> evaluate -> gate -> register -> deploy. Arguments "
        "after `--` go to `python -m trainer.task` unchanged (none: the packaged sample).",
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    compile_ = commands.add_parser(
        "compile", parents=[common], allow_abbrev=False, help="Write the Vertex AI pipeline spec (YAML)."
    )
    compile_.add_argument("--output", required=True, help="The pipeline spec file to write, e.g. pipeline.yaml.")
    run = commands.add_parser(
        "run",
        parents=[common],
        allow_abbrev=False,
        help="Run the pipeline: on this machine (--local) or on Vertex AI Pipelines.",
    )
    run.add_argument(
        "--local",
        action="store_true",
        help="Run every step on this machine with kfp.local; register and deploy are "
        "dry runs (their requests printed, nothing sent).",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="Vertex AI: print the PipelineJob as JSON and submit nothing (needs no credentials).",
    )
    return parser


def parse_args(argv: Sequence[str]) -> tuple:
    """(options, trainer args): everything after the first `--` belongs to the trainer."""
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    return build_arg_parser().parse_args(argv[:split]), argv[split + 1 :]


def is_local(options: argparse.Namespace) -> bool:
    return options.command == "run" and options.local


def check_where(options: argparse.Namespace) -> None:
    """Vertex runs and compile need every Vertex flag; a local run takes only those its dry-run
    requests name (--project, --region, --serving-image-uri)."""
    if is_local(options):
        given = [
            flag
            for flag in ("--bucket", "--image-uri", *SUBMIT_FLAGS, "--service-account", "--dry-run")
            if flag_value(options, flag) not in (None, False)
        ]
        if given:
            raise UserError(
                f"{given[0]}: not used by a local run (run --local trains on this machine "
                f"and dry-runs register and deploy); drop it or drop --local"
            )
        return
    missing = [flag for flag in VERTEX_FLAGS if not flag_value(options, flag)]
    if missing:
        raise UserError(
            f"{', '.join(missing)}: required for {options.command}"
            f"{'' if options.command == 'compile' else ' on Vertex AI (or run --local)'}"
        )


def default_display_name(now: datetime.datetime | None = None) -> str:
    return f"vbt-pipeline-{(now or datetime.datetime.now()):%Y%m%d-%H%M%S}"


def local_trainer_config(job_dir: str, trainer_args: Sequence[str]) -> config_lib.Config:
    if "--job-dir" in trainer_args:
        raise UserError("--job-dir: give it to trainer.pipeline (before `--`), not to the trainer")
    return config_lib.build_config([*trainer_args, "--job-dir", job_dir], environ={})


def check_local_job_dir(trainer_config: config_lib.Config) -> None:
    """What the training step's trainer.task would refuse in the job dir (a finished run
    without --overwrite, an unfinished one with other settings), refused here in its words, exit
    code 2, before kfp.local starts: kfp.local reports a failed step only as a failed pipeline,
    whose exit code is 1."""
    jobdir.decide(trainer_config, jobdir.JobPaths.from_config(trainer_config), job_id=None)


def main(argv: Sequence[str]) -> int:
    options, trainer_args = parse_args(argv)
    gate = pipeline_gate.parse(options.gate)
    check_where(options)
    display_name = options.display_name or default_display_name()
    if is_local(options):
        job_dir = options.job_dir or os.path.join("runs", display_name.removeprefix("vbt-"))
        trainer_config = local_trainer_config(job_dir, trainer_args)
        pipeline_gate.check_against(gate, trainer_config)
        check_local_job_dir(trainer_config)
        return pipeline_local.run(pipeline_local.plan(options, gate, job_dir, trainer_args))
    with api.google_errors():
        plan = pipeline_vertex.plan(options, gate, display_name, trainer_args)
        if options.command == "compile":
            pipeline_vertex.compile_spec(plan, options.output)
            print(
                f"wrote {options.output}: the pipeline spec for Vertex AI Pipelines "
                f"(scripts/pipeline-cloud.sh submits it)"
            )
            return 0
        return pipeline_vertex.run(plan, options, display_name)
