"""Exports an encoder as TF-Hub-format encoder and preprocessor SavedModels.

`python -m trainer.export_encoder --encoder NAME_OR_PATH --output-dir OUTPUT_DIR` writes
OUTPUT_DIR/encoder (inputs: input_word_ids/input_mask/input_type_ids; outputs:
pooled_output/sequence_output/encoder_outputs) and OUTPUT_DIR/preprocessor (strings in;
`tokenize` and `bert_pack_inputs(seq_length=...)` attached), both loadable with
`hub.KerasLayer` in any process that imports tensorflow_text. OUTPUT_DIR itself is a valid
`--encoder` afterwards, which is how a network-only encoder reaches an offline machine.

`--encoder JOB_DIR` (a finished training run) exports the encoder as that run fine-tuned it,
with the run's preprocessor and sequence length, to JOB_DIR/encoder_export by default.
"""

import argparse
import os
import sys

import trainer
import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli, config, helptext

JOB_EXPORT_DIR = "encoder_export"


def build_arg_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m trainer.export_encoder",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n")[-1],
        formatter_class=helptext.DefaultsShown,
    )
    parser.add_argument(
        "--encoder",
        default=config.DEFAULT_ENCODER,
        help="registry name, TF-Hub handle URL, local/gs:// checkpoint directory, "
        "or the job dir of a finished training run (its fine-tuned encoder)",
    )
    parser.add_argument(
        "--preprocessor",
        help="TF-Hub preprocess SavedModel for encoders that do not carry their vocabulary (a job dir knows its own)",
    )
    parser.add_argument(
        "--encoder-backend",
        choices=config.ENCODER_BACKENDS,
        default="native",
        help="how the encoder is loaded before it is written (a job dir: native)",
    )
    parser.add_argument(
        "--max-seq-length",
        type=int,
        default=None,
        help="the preprocessor's default sequence length (a job dir: the run's; otherwise 128)",
    )
    parser.add_argument(
        "--output-dir",
        help="local or gs:// directory; required unless --encoder is a "
        f"job dir, which defaults to JOB_DIR/{JOB_EXPORT_DIR}",
    )
    parser.add_argument(
        "--cache-dir",
        help="where downloads and conversions are cached (default: $VBT_CACHE_DIR or ~/.cache/vertex-bert-trainer)",
    )
    return parser


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    trainer.import_tensorflow()
    from trainer import storage
    from trainer.errors import UserError
    from trainer.modeling.encoders import finetuned, hub, load_encoder

    job_dir = finetuned.is_job_dir(args.encoder)
    if job_dir and (args.preprocessor or args.encoder_backend != "native"):
        raise UserError(
            "--encoder JOB_DIR: the run's config.json names its preprocessor and "
            "encoder; drop --preprocessor and --encoder-backend"
        )
    if not job_dir and not args.output_dir:
        raise UserError("--output-dir: required (only a job dir as --encoder has a default)")
    output_dir = args.output_dir or storage.join(args.encoder, JOB_EXPORT_DIR)
    # Where it goes is checked before the encoder loads (gs:// access, a missing bucket).
    storage.exists(output_dir)
    storage.require_bucket(output_dir)
    if job_dir:
        encoder, _ = finetuned.load_finetuned_encoder(
            args.encoder, seq_length=args.max_seq_length, cache_dir=args.cache_dir
        )
    else:
        encoder = load_encoder(
            args.encoder,
            preprocessor=args.preprocessor,
            backend=args.encoder_backend,
            seq_length=args.max_seq_length or 128,
            cache_dir=args.cache_dir,
        )
    hub.save_encoder_and_preprocessor(encoder.network, encoder.preprocessor, output_dir)
    print(
        f"Exported {encoder.source} to {os.path.join(output_dir, 'encoder')} and "
        f"{os.path.join(output_dir, 'preprocessor')}; use it with --encoder {output_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
