"""`python -m trainer.evaluate`: score an exported model on a labelled file with its task's metrics.

Any export (classification, pairs, regression, multi-label, token classification, embeddings:
scored by the metrics of the kind of file it is given) on a CSV,
TSV, JSON Lines or JSON file with labels, or for a tagger a file of tagged sentences (CoNLL,
JSON Lines of tokens and tags or of text and spans), scored by the code that
scored its run's test split, at the export's own decisions (calibration temperature,
thresholds). The metrics are printed; --output writes them as JSON, with the worst errors.
"""

import sys

import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli, helptext, task_registry
from trainer.serving import predict_file


def build_arg_parser():
    parser = cli.ArgumentParser(
        prog="python -m trainer.evaluate", description=__doc__.splitlines()[0], formatter_class=helptext.DefaultsShown
    )
    predict_file.add_input_arguments(
        parser,
        input_help=" With labels"
        + "".join(
            f"; for a {kind.name} model, {kind.unit.formats}" for kind in task_registry.kinds() if kind.unit.formats
        )
        + ".",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="Write the metrics, the decisions they were made at and the worst "
        "errors as JSON here (.json or .json.gz, local or gs://). Default: "
        "print them only.",
    )
    predict_file.add_copy_arguments(parser, "is scored")
    parser.add_argument(
        "--label-column",
        default=None,
        help="Column holding the label; by default the run's own when --model-dir "
        "is a run's JOB_DIR/model, else detected as the trainer does.",
    )
    parser.add_argument(
        "--label-columns",
        default=None,
        help="A multi-label model's labels as one 0/1 column per label, comma-separated; by default the run's own.",
    )
    parser.add_argument("--batch-size", type=int, default=128, help="Texts per model call.")
    parser.add_argument(
        "--report-errors",
        type=int,
        default=50,
        metavar="N",
        help="Errors listed in --output, highest loss first (regression: largest "
        "absolute error; taggers: most entities wrong).",
    )
    parser.add_argument(
        "--report-correct",
        type=int,
        default=0,
        metavar="N",
        help="After the errors, the least confident correct predictions listed (classification and multi-label).",
    )
    predict_file.add_run_arguments(parser)
    return parser


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    cli.setup_logging()
    from trainer.reporting import evaluation

    return evaluation.run(args)


if __name__ == "__main__":
    sys.exit(cli.run(main))
