"""DeBERTa-v3's tiny fixture for tests/modeling/encoders/test_encoder_families.py: microsoft/deberta-v3-base's
settings at a tiny width, with few enough position buckets that the test's 32-token batches
reach the log-spaced ones, and an spm.model laid out as DeBERTa-v3's ([PAD], [CLS], [SEP],
[UNK] first), trained here with the sentencepiece library."""

import json
import os

WORDS = (
    "i love hate this movie it is was not good bad great awful fine ok the so very meh a ! . , ? movies loved"
).split()


def tiny_config():
    import transformers

    # As published: relative attention over 2 x position_buckets shared rows, LayerNorm'd,
    # c2p and p2c with shared key projections, no absolute positions, no token types, eps 1e-7.
    return transformers.DebertaV2Config(
        vocab_size=128,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        relative_attention=True,
        position_buckets=8,
        max_relative_positions=-1,
        pos_att_type=["p2c", "c2p"],
        share_att_key=True,
        norm_rel_ebd="layer_norm",
        position_biased_input=False,
        type_vocab_size=0,
        hidden_act="gelu",
        layer_norm_eps=1e-7,
        pad_token_id=0,
        initializer_range=0.2,
    )


def corpus():
    """Deterministic sentences over WORDS (the fixture texts' words and a few more)."""
    return [" ".join(WORDS[(i * 7 + j * 5) % len(WORDS)] for j in range(3 + i % 6)) for i in range(200)]


def write_tokenizer(directory: str):
    import sentencepiece

    prefix = os.path.join(directory, "spm")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()),
        model_prefix=prefix,
        model_type="unigram",
        vocab_size=60,
        hard_vocab_limit=False,
        character_coverage=1.0,
        minloglevel=2,
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        pad_piece="[PAD]",
        bos_piece="[CLS]",
        eos_piece="[SEP]",
        unk_piece="[UNK]",
        num_threads=1,
    )
    os.remove(prefix + ".vocab")
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": False, "tokenizer_class": "DebertaV2Tokenizer"}, f)
