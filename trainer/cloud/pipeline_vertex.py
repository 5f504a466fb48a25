"""The pipeline on Vertex AI Pipelines: its spec (`compile`) and its PipelineJob (`run`).

`aiplatform.PipelineJob` reads the compiled spec and assembles the PipelineJob resource (runtime
parameters, pipeline root, labels) without any network call; `run` submits it, or with --dry-run
prints `job.to_dict()` plus the service account `submit()` adds: the resource a submission sends.
Every step runs in the trainer image; the train step submits the training job with
`trainer.submit train`, which is built here once, offline, to check it before anything is sent.
"""

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence

from trainer import storage
from trainer.cloud import pipeline_components, pipeline_deploy, pipeline_gate, submission
from trainer.errors import UserError
from trainer.vertex import api

# trainer.submit train's machine and scheduling flags, passed on to the training job unchanged.
SUBMIT_FLAGS = (
    "--machine-type",
    "--accelerator-type",
    "--accelerator-count",
    "--replica-count",
    "--tpu",
    "--tpu-chips",
    "--scheduling",
    "--max-wait",
    "--tensorboard",
)


def submit_arguments(options: argparse.Namespace) -> list:
    """trainer.submit train's flags for the training job, --job-dir aside (the step adds it)."""
    args = [
        "--project",
        options.project,
        "--region",
        options.region,
        "--bucket",
        options.bucket,
        "--image-uri",
        options.image_uri,
    ]
    for flag in (*SUBMIT_FLAGS, "--service-account"):
        if pipeline_deploy.flag_value(options, flag) is not None:
            args += [flag, str(pipeline_deploy.flag_value(options, flag))]
    return args


def check_training_job(submit_args: Sequence[str], job_dir: str, trainer_args: Sequence[str]):
    """Builds the training job as the train step will, offline: every flag and trainer argument
    is checked now. Returns the trainer's config."""
    job_options, job_trainer_args = submission.parse_args(
        ["train", *submit_args, "--job-dir", job_dir, "--", *trainer_args]
    )
    submission.build_job(job_options, job_trainer_args, credentials=api.credentials(True))
    return submission.check_trainer_args(job_trainer_args)


def plan(
    options: argparse.Namespace, gate: pipeline_gate.Gate, display_name: str, trainer_args: Sequence[str]
) -> pipeline_components.Plan:
    staging = submission.staging_uri(options.bucket)
    job_dir = submission.base_output_dir(options.job_dir, staging, display_name)
    submit_args = submit_arguments(options)
    pipeline_gate.check_against(gate, check_training_job(submit_args, job_dir, trainer_args))
    where = {"--project": options.project, "--region": options.region, "--serving-image-uri": options.serving_image_uri}
    return pipeline_components.Plan(
        job_dir=job_dir,
        gate=str(gate),
        trainer_args=list(trainer_args),
        submit_args=submit_args,
        deploy_args=pipeline_deploy.arguments(options, where, job_dir, dry_run=False),
        base_image=options.image_uri,
        install_kfp=True,
    )


def compile_spec(vertex_plan: pipeline_components.Plan, path: str) -> None:
    """Writes the spec to `path` atomically: compiled beside it, then renamed."""
    if "://" in path:
        raise UserError(f"--output: a file on this machine, got {path!r} (copy it to Cloud Storage after)")
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = storage.temporary_sibling(path) + ".yaml"  # the compiler insists on the suffix
    try:
        pipeline_components.compile_to(vertex_plan, tmp)
        storage.publish_local_file(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def pipeline_job(
    vertex_plan: pipeline_components.Plan, options: argparse.Namespace, display_name: str, credentials=None
):
    """The SDK's PipelineJob; `credentials=None` means Application Default Credentials."""
    from google.cloud import aiplatform

    with tempfile.TemporaryDirectory(prefix="vbt-pipeline-") as tmp:
        spec = os.path.join(tmp, "pipeline.yaml")
        pipeline_components.compile_to(vertex_plan, spec)
        return aiplatform.PipelineJob(
            display_name=display_name,
            template_path=spec,
            job_id=display_name,
            pipeline_root=f"{submission.staging_uri(options.bucket)}/vertex-bert-trainer/pipelines",
            parameter_values={"job_dir": vertex_plan.job_dir, "gate": vertex_plan.gate},
            enable_caching=False,
            labels={"app": "vertex-bert-trainer", "command": "pipeline"},
            project=options.project,
            location=options.region,
            credentials=credentials,
        )


def run(vertex_plan: pipeline_components.Plan, options: argparse.Namespace, display_name: str) -> int:
    job = pipeline_job(vertex_plan, options, display_name, credentials=api.credentials(options.dry_run))
    if options.dry_run:
        resource = job.to_dict()
        if options.service_account:
            resource["serviceAccount"] = options.service_account
        print(
            f"Dry run: PipelineJob for projects/{options.project}/locations/{options.region}, not submitted.",
            file=sys.stderr,
        )
        print(json.dumps(resource, indent=2))
        return 0
    job.submit(service_account=options.service_account)
    print(f"submitted pipeline job {job.resource_name}; the run goes to {vertex_plan.job_dir}")
    return 0
