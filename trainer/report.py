"""`python -m trainer.report --job-dir DIR`: (re)build report.html, report/*.png, errors.csv and
MODEL_CARD.md for a finished run of any task, local or gs://, without retraining."""
import argparse
import sys

import trainer
from trainer import cli


def build_arg_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m trainer.report",
        description="Rebuild report.html, report/*.png, errors.csv and MODEL_CARD.md for a finished "
                    "run (local or gs://) without retraining.")
    parser.add_argument("--job-dir", required=True, help="A finished run's --job-dir (local or gs://).")
    parser.add_argument("--report-errors", type=int, default=None, metavar="N",
                        help="Errors listed per split, highest loss first (regression: largest "
                             "absolute error). Default: the run's own --report-errors (50 unless "
                             "it was set).")
    parser.add_argument("--report-correct", type=int, default=None, metavar="N",
                        help="After the errors, the least confident correct predictions listed "
                             "per split (classification and multi-label). Default: the run's own "
                             "--report-correct (0 unless it was set).")
    parser.add_argument("--verbose", action="store_true", help="Also show TensorFlow's warnings.")
    return parser


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    cli.setup_logging(args.verbose)
    trainer.import_tensorflow()
    from trainer.reporting.build import build_report

    build_report(args.job_dir, errors_per_split=args.report_errors,
                 correct_per_split=args.report_correct)
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
