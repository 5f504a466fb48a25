"""`python -m trainer.report --job-dir DIR`: (re)build report.html, report/*.png, errors.csv and
MODEL_CARD.md for a finished run of any task, local or gs://, without retraining."""

import argparse
import sys

import trainer
import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli


def build_arg_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m trainer.report",
        description="Rebuild report.html, report/*.png, errors.csv and MODEL_CARD.md for a finished "
        "run (local or gs://) without retraining.",
    )
    parser.add_argument("--job-dir", required=True, help="A finished run's --job-dir (local or gs://).")
    parser.add_argument(
        "--report-errors",
        type=int,
        default=None,
        metavar="N",
        help="Errors listed per split, highest loss first (regression: largest "
        "absolute error). Default: the run's own --report-errors (50 unless "
        "it was set).",
    )
    parser.add_argument(
        "--report-correct",
        type=int,
        default=None,
        metavar="N",
        help="After the errors, the least confident correct predictions listed "
        "per split (classification and multi-label). Default: the run's own "
        "--report-correct (0 unless it was set).",
    )
    parser.add_argument("--verbose", action="store_true", help="Also show TensorFlow's warnings.")
    return parser


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    cli.setup_logging(args.verbose)
    trainer.import_tensorflow()
    from trainer.reporting.build import build_report

    check_finished(args.job_dir)
    build_report(args.job_dir, errors_per_split=args.report_errors, correct_per_split=args.report_correct)
    return 0


def check_finished(job_dir: str) -> None:
    """A job dir of trainer.task without metrics.json: one line on what it holds and what to do
    (a run still going, one to resume, one that failed before training), not "finish it"."""
    from trainer import config as config_lib
    from trainer import storage
    from trainer.errors import UserError
    from trainer.reporting.build import model_dir_of, moved_along
    from trainer.training import jobdir

    config_path = storage.join(job_dir, "config.json")
    if not storage.exists(config_path) or storage.exists(storage.join(job_dir, "metrics.json")):
        return  # build_report's own checks
    config = config_lib.load(config_path)
    paths = jobdir.JobPaths(
        job_dir,
        model_dir_of(config, job_dir),
        moved_along(config, job_dir, config.output.checkpoint_dir, "checkpoints"),
        moved_along(config, job_dir, config.output.tensorboard_dir, "tensorboard"),
    )
    raise UserError(f"--job-dir: {job_dir} holds no finished run (no metrics.json): {jobdir.why_unfinished(paths)}")


if __name__ == "__main__":
    sys.exit(cli.run(main))
