"""The pipeline's register-and-deploy step: `python -m trainer.deploy`, with the flags given here.

trainer.deploy uploads the run's model as a new version of --parent-model (with
--version-aliases) and deploys it in one command: beside the serving version with
--traffic-percent N (a canary), or with all traffic and the `default` alias (--promote). The
pipeline runs that one command as its last step, so that what a pipeline deploys and what a
person deploys by hand are the same requests. A local run adds --dry-run: the requests are
printed, nothing is sent.
"""

import argparse

from trainer.cloud import deployment

# Passed on to trainer.deploy unchanged when given (its --help has the details).
DEPLOY_FLAGS = {
    "--parent-model": "The registered model the new one becomes a version of (ID or resource name).",
    "--version-aliases": "Comma-separated aliases of the new version, e.g. candidate.",
    "--endpoint": "Deploy to this endpoint (ID or resource name) instead of a new one.",
    "--traffic-percent": "Canary: the new version takes this share (1-99) of --endpoint's traffic.",
    "--serving-machine-type": "Machine type of each serving replica (trainer.deploy --machine-type).",
}
# Stand-ins a local run prints in its dry-run requests when no project, region or image is given.
LOCAL_WHERE = {"--project": "PROJECT_ID", "--region": "us-central1", "--serving-image-uri": "SERVING_IMAGE_URI"}


def flag_value(options: argparse.Namespace, flag: str):
    """The value of trainer.pipeline's `flag` (e.g. --parent-model) in `options`."""
    return getattr(options, flag[2:].replace("-", "_"))


def add_arguments(group) -> None:
    for flag, help_text in DEPLOY_FLAGS.items():
        group.add_argument(flag, help=help_text)
    group.add_argument(
        "--promote", action="store_true", help="Full deploy: all traffic and the `default` alias to the new version."
    )


def arguments(options: argparse.Namespace, where: dict, job_dir: str, dry_run: bool) -> list:
    """trainer.deploy's arguments, all but --job-dir (the step adds the run's), checked now by
    trainer.deploy's own parser and checks: a wrong combination fails before training."""
    args = ["--project", where["--project"], "--region", where["--region"], "--image-uri", where["--serving-image-uri"]]
    for flag in DEPLOY_FLAGS:
        value = flag_value(options, flag)
        if value is not None:
            args += ["--machine-type" if flag == "--serving-machine-type" else flag, value]
    args += (["--promote"] if options.promote else []) + (["--dry-run"] if dry_run else [])
    deployment.check_deploy(deployment.build_parser().parse_args([*args, "--job-dir", job_dir]))
    return args


def local_where(options: argparse.Namespace) -> dict:
    return {flag: flag_value(options, flag) or stand_in for flag, stand_in in LOCAL_WHERE.items()}
