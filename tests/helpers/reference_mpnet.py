"""MPNet's tiny fixture for tests/modeling/encoders/test_encoder_families.py: a WordPiece vocabulary with
MPNet's <s>/<pad>/</s>/<unk> in front of BERT's specials, as microsoft/mpnet-base has it."""

import json
import os

WORDS = [
    "i",
    "love",
    "hate",
    "this",
    "movie",
    "it",
    "is",
    "was",
    "not",
    "good",
    "bad",
    "great",
    "awful",
    "fine",
    "ok",
    "the",
    "so",
    "very",
    "meh",
    "a",
    "##s",
    "!",
    ".",
    ",",
    "?",
]
VOCAB = ["<s>", "<pad>", "</s>", "<unk>", "[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS, "<mask>"]


def tiny_config():
    import transformers

    # layer_norm_eps as published (transformers' default, 1e-12, is BERT's): the int8 copy
    # stores its first part in float16, where 1e-12 is 0, and MPNet's padding rows are 0.
    return transformers.MPNetConfig(
        vocab_size=len(VOCAB),
        max_position_embeddings=66,
        pad_token_id=1,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        initializer_range=0.2,
        layer_norm_eps=1e-5,
    )


def write_tokenizer(directory: str):
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "MPNetTokenizer"}, f)
