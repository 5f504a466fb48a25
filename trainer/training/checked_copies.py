"""`python -m trainer.export_quantized`: the checked int8, bfloat16 or ONNX copy of a finished run's model.

For a model exported before the run wrote one, by a run that skipped it (`--export-int8 off`,
`--export-bfloat16 auto` on a machine without native bfloat16), or one whose copy failed to
build. Not for a copy the run's check refused (precisions.json records it; --precision says so):
the same weights checked on the same validation rows are refused again. The classifier is built
again from the run's config.json and given the export's own weights; the run's data is read
again (as trainer.report does) for the validation rows the check compares on. Exit 1 when the
copy fails the check: it is not written, and precisions.json records the refusal.
"""

import argparse
import os

import trainer
from trainer import cli, helptext, storage
from trainer.errors import UserError
from trainer.serving.variants import ONNX_VARIANTS, VARIANTS


def build_arg_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m trainer.export_quantized",
        description=__doc__.splitlines()[0],
        formatter_class=helptext.DefaultsShown,
    )
    parser.add_argument("--model-dir", required=True, help="A finished run's exported model (JOB_DIR/model).")
    parser.add_argument(
        "--job-dir", help="The run's job dir (config.json, metrics.json). Default: the model dir's parent."
    )
    parser.add_argument(
        "--precision",
        default="int8",
        choices=VARIANTS,
        help="The copy to write beside the float32 model: int8 (TensorFlow Lite, "
        "dynamic-range quantized), bfloat16 (a SavedModel), onnx (float32 "
        "ONNX with its tokenizer, for --runtime onnx) or onnx-int8 (quantized "
        "from the onnx copy, which it needs).",
    )
    return parser


def run_context(model_dir: str, job_dir: str):
    """A RunContext of the finished run as far as the copy needs: data, task, pooling (the copy
    builds its own encoder)."""
    from trainer.reporting.build import load_finished_run
    from trainer.training import jobdir, stages
    from trainer.training.context import RunContext

    config, metrics = load_finished_run(job_dir)
    paths = jobdir.JobPaths(job_dir, model_dir, config.output.checkpoint_dir, config.output.tensorboard_dir)
    ctx = RunContext(config, dict(os.environ), paths, is_chief=True)
    stages.load_data(ctx)
    if list(ctx.datasets.labels.names) != list(metrics["labels"]):
        raise UserError(
            f"the run's data now yields labels {ctx.datasets.labels.names}, but the run "
            f"trained on {metrics['labels']}: its data files changed since"
        )
    ctx.pooling = metrics["hyperparameters"]["pooling"]
    return ctx


def parent_job_dir(model_dir: str) -> str:
    """The job dir a model dir sits in by default (JOB_DIR/model), refused with one line when
    that directory holds no run: the copy needs the run's config.json and data."""
    parent = os.path.dirname(model_dir if "://" in model_dir else os.path.abspath(model_dir))
    if not storage.exists(storage.join(parent, "config.json")):
        raise UserError(
            f"--job-dir: not given, and {parent}, the directory --model-dir {model_dir} "
            f"is in, is not a job dir of trainer.task (no config.json); pass --job-dir "
            f"with the run's job dir: the copy is checked on its validation data"
        )
    return parent


def _check_onnx_source(model_dir: str, reference, precision: str) -> None:
    """Refuses, in one line, an ONNX copy of an export from before `tokenize` (the copy is
    checked on the export's own features) and an onnx-int8 copy without the onnx copy it is
    quantized from."""
    from trainer.serving import variants

    if not hasattr(reference, "tokenize"):  # (a tagger's export has no `predict_tokens`)
        raise UserError(
            f"--precision {precision}: {model_dir} predates the exports' `tokenize` "
            f"function, which an ONNX copy is checked against; export the run again"
        )
    if precision == "onnx-int8" and "onnx" not in variants.available(model_dir):
        raise UserError(
            f"--precision onnx-int8: quantizes the model dir's onnx copy, and "
            f"{model_dir} holds none; write it first with --precision onnx"
        )


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    cli.setup_logging()
    model_dir = args.model_dir.rstrip("/")
    storage.require_bucket(model_dir)
    if not storage.exists(storage.join(model_dir, "saved_model.pb")):
        raise UserError(
            f"--model-dir: no exported model in {model_dir} (expected saved_model.pb; point it at JOB_DIR/model)"
        )
    job_dir = args.job_dir or parent_job_dir(model_dir)
    trainer.import_tensorflow()
    from trainer.serving import export
    from trainer.training import results

    ctx = run_context(model_dir, job_dir)
    why_not = results.unsupported(ctx, args.precision)
    if why_not:
        raise UserError(f"--precision {args.precision}: no such copy of {model_dir} can be made: {why_not}")
    reference = export.load_module(model_dir)
    if args.precision in ONNX_VARIANTS:
        _check_onnx_source(model_dir, reference, args.precision)
    figures = results.write_copy(ctx, model_dir, reference.classifier_variables, args.precision)
    return 0 if figures["passed"] else 1
