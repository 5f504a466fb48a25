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
from trainer import cli, config


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.export_encoder", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--encoder", default=config.DEFAULT_ENCODER,
                        help="registry name, TF-Hub handle URL, or local/gs:// checkpoint directory")
    parser.add_argument("--preprocessor", help="TF-Hub preprocess SavedModel for encoders "
                                               "that do not carry their vocabulary")
    parser.add_argument("--encoder-backend", choices=config.ENCODER_BACKENDS, default="native",
                        help="how the encoder is loaded before it is written")
    parser.add_argument("--max-seq-length", type=int, default=128,
                        help="the preprocessor's default sequence length")
    parser.add_argument("--output-dir", required=True, help="local or gs:// directory")
    parser.add_argument("--cache-dir", help="where downloads and conversions are cached "
                                            "(default: $VBT_CACHE_DIR or ~/.cache/vertex-bert-trainer)")
    return parser


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    trainer.import_tensorflow()
    from trainer.modeling.encoders import hub, load_encoder

    encoder = load_encoder(args.encoder, preprocessor=args.preprocessor,
                           backend=args.encoder_backend, seq_length=args.max_seq_length,
                           cache_dir=args.cache_dir)
    hub.save_encoder_and_preprocessor(encoder.network, encoder.preprocessor, args.output_dir)
    print(f"Exported {encoder.source} to {os.path.join(args.output_dir, 'encoder')} and "
          f"{os.path.join(args.output_dir, 'preprocessor')}")
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
