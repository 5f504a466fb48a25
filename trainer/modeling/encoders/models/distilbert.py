"""DistilBERT (Sanh et al. 2019; distilbert/distilbert-base-uncased, -multilingual-cased, and the
many classifiers fine-tuned from them): BERT's network with 6 layers, no token types, no pooler,
under its own config keys and weight names; its tokenizer is BERT's WordPiece.

Read against Hugging Face's modeling_distilbert.py: Embeddings (word + learned position,
LayerNorm with epsilon fixed at 1e-12), TransformerBlock (post-LN as BERT's: sa_layer_norm after
attention, output_layer_norm after the FFN's lin1 -> activation -> lin2, epsilon 1e-12), no
pooler. With `sinusoidal_pos_embds` the position table is still a weight of the checkpoint,
read as any other. One difference in training only: BERT's block drops out the attention's
output before its residual, DistilBERT's does not.
"""

import json

from trainer.errors import UserError
from trainer.modeling.encoders.models import Family, bert
from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

# DistilBertConfig's keys for BERT's settings, and its defaults (configuration_distilbert.py):
# transformers reads a config.json without one of them as this default.
_BERT_KEYS = {
    "vocab_size": ("vocab_size", 30522),
    "dim": ("hidden_size", 768),
    "n_layers": ("num_hidden_layers", 6),
    "n_heads": ("num_attention_heads", 12),
    "hidden_dim": ("intermediate_size", 3072),
    "max_position_embeddings": ("max_position_embeddings", 512),
    "dropout": ("hidden_dropout_prob", 0.1),
    "attention_dropout": ("attention_probs_dropout_prob", 0.1),
}

# (native sublayer, Hugging Face module) of one TransformerBlock.
_BLOCK_PARTS = [
    ("self_attention/query", "attention.q_lin"),
    ("self_attention/key", "attention.k_lin"),
    ("self_attention/value", "attention.v_lin"),
    ("self_attention/attention_output", "attention.out_lin"),
    ("self_attention_layer_norm", "sa_layer_norm"),
    ("intermediate", "ffn.lin1"),
    ("output", "ffn.lin2"),
    ("output_layer_norm", "output_layer_norm"),
]


def read_config(raw: dict, path: str):
    """BERT's EncoderConfig of a DistilBERT config.json: its keys renamed, no token types."""
    activation = raw.get("activation", "gelu")
    if activation not in bert.HF_GELU_APPROXIMATE:
        raise UserError(
            f"--encoder: {path} sets activation {json.dumps(activation)}; the native "
            f"distilbert encoder computes {', '.join(bert.HF_GELU_APPROXIMATE)}"
        )
    settings = {bert_key: raw.get(key, default) for key, (bert_key, default) in _BERT_KEYS.items()}
    if settings["hidden_size"] % settings["num_attention_heads"]:
        raise UserError(
            f"--encoder: {path}: dim {settings['hidden_size']} is not a multiple of "
            f"n_heads {settings['num_attention_heads']}"
        )
    return bert.read_config(
        {
            **settings,
            "model_type": "distilbert",
            "hidden_act": activation,
            "type_vocab_size": 0,
            "layer_norm_eps": 1e-12,
        },
        path,
    )


def map_weights(config, get) -> dict:
    weights = {
        "word_embeddings/embeddings": get("embeddings.word_embeddings.weight"),
        "position_embedding/embeddings": get("embeddings.position_embeddings.weight"),
        **bert.hf_layer_norm(get, "embeddings/layer_norm", "embeddings.LayerNorm"),
    }
    for i in range(config.num_layers):
        for native, module in _BLOCK_PARTS:
            read = bert.hf_layer_norm if "layer_norm" in native else bert.hf_dense
            weights.update(read(get, f"transformer/layer_{i}/{native}", f"transformer.layer.{i}.{module}"))
    return weights


FAMILY = Family(
    name="DistilBERT",
    model_types=("distilbert",),
    tokenizer_files=("vocab.txt",),
    read_config=read_config,
    map_weights=map_weights,
    preprocessor=WordPiecePreprocessor,
    weight_prefixes=("distilbert",),
    **bert.NETWORK,
)
