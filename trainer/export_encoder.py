"""Exports an encoder as TF-Hub-format encoder and preprocessor SavedModels.

`python -m trainer.export_encoder --encoder NAME_OR_PATH --output-dir OUTPUT_DIR` writes
OUTPUT_DIR/encoder (inputs: input_word_ids/input_mask/input_type_ids; outputs:
pooled_output/sequence_output/encoder_outputs) and OUTPUT_DIR/preprocessor (strings in;
`tokenize` and `bert_pack_inputs(seq_length=...)` attached), both loadable with
`hub.KerasLayer` in any process that imports tensorflow_text. OUTPUT_DIR itself is a valid
`--encoder` afterwards, which is how a network-only encoder reaches an offline machine.
"""
import argparse
import os
import sys

import trainer

trainer.import_tensorflow()  # an entry point: load TensorFlow without its start-up banner

from trainer.encoders import DEFAULT_ENCODER, ENCODER_NAMES, BACKENDS, Encoder, load_encoder  # noqa: E402
from trainer.encoders import hub  # noqa: E402
from trainer.encoders.preprocessing import BertPreprocessor  # noqa: E402
from trainer.errors import UserError  # noqa: E402


def export_encoder(encoder: Encoder, output_dir: str):
    """Writes `encoder` (pretrained or fine-tuned) to output_dir/{encoder,preprocessor}."""
    native_preprocessor = isinstance(encoder.preprocessor, BertPreprocessor)
    hub.save_encoder_savedmodel(
        encoder.network, os.path.join(output_dir, "encoder"),
        encoder.preprocessor.vocab_file if native_preprocessor else None,
        encoder.preprocessor.lower_case if native_preprocessor else None)
    hub.save_preprocessor_savedmodel(encoder.preprocessor, os.path.join(output_dir, "preprocessor"))


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m trainer.export_encoder", description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", default=DEFAULT_ENCODER,
                        help=f"registry name ({', '.join(ENCODER_NAMES)}), TF-Hub handle URL, "
                             "or local/gs:// checkpoint directory (default: %(default)s)")
    parser.add_argument("--preprocessor", help="TF-Hub preprocess SavedModel for encoders "
                                               "that do not carry their vocabulary")
    parser.add_argument("--encoder-backend", choices=BACKENDS, default="native")
    parser.add_argument("--max-seq-length", type=int, default=128,
                        help="the preprocessor's default sequence length (default: %(default)s)")
    parser.add_argument("--output-dir", required=True, help="local or gs:// directory")
    parser.add_argument("--cache-dir", help="where downloads and conversions are cached")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        encoder = load_encoder(args.encoder, preprocessor=args.preprocessor,
                               backend=args.encoder_backend, seq_length=args.max_seq_length,
                               cache_dir=args.cache_dir)
        export_encoder(encoder, args.output_dir)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
    print(f"Exported {encoder.source} to {os.path.join(args.output_dir, 'encoder')} and "
          f"{os.path.join(args.output_dir, 'preprocessor')}")


if __name__ == "__main__":
    main()
