"""DistilBERT's tiny fixture for tests/modeling/encoders/test_encoder_families.py: BERT's WordPiece vocabulary
with [PAD] at 0 and [UNK], [CLS], [SEP], [MASK] after unused rows, as
distilbert/distilbert-base-uncased has them (0, 100-103), and its tokenizer_config.json."""

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
VOCAB = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]


def tiny_config():
    import transformers

    # As published but tiny: learned positions, exact GELU, pad id 0 (LayerNorm epsilon is
    # fixed at 1e-12 in modeling_distilbert.py, not a config setting).
    return transformers.DistilBertConfig(
        vocab_size=len(VOCAB),
        max_position_embeddings=64,
        sinusoidal_pos_embds=False,
        dim=32,
        n_layers=2,
        n_heads=4,
        hidden_dim=64,
        activation="gelu",
        pad_token_id=0,
        initializer_range=0.2,
    )


def write_tokenizer(directory: str, lower_case: bool = True):
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    # distilbert/distilbert-base-uncased's file, word for word (the multilingual model's says
    # false): no tokenizer_class, so AutoTokenizer picks BERT's for model_type distilbert.
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": lower_case, "model_max_length": 512}, f)
