"""A tiny, deterministic BERT checkpoint in Hugging Face layout, written by the tests themselves.

Two layers, hidden size 16, two heads, a 30-token vocabulary: small enough that a full training
run takes seconds, real enough that every loader, the tokenizer and export see the same files a
user's checkpoint would give them.
"""

import json
import os

import numpy as np

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
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

CONFIG = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "vocab_size": len(VOCAB),
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
}


def hf_weights(config=CONFIG, seed=0, scale=0.2):
    """Random weights under Hugging Face BertModel names (Linear weights are [out, in]).

    With `"model_type": "electra"` they are ElectraModel's instead: embeddings `embedding_size`
    wide, an `embeddings_project` up to the hidden size when that differs, and no pooler.
    """
    rng = np.random.default_rng(seed)
    h, inter = config["hidden_size"], config["intermediate_size"]
    electra = config.get("model_type") == "electra"
    width = config.get("embedding_size") or h

    def normal(*shape):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def layer_norm(prefix, n=h):
        return {f"{prefix}.weight": (1.0 + normal(n) * 0.5).astype(np.float32), f"{prefix}.bias": normal(n)}

    def linear(prefix, n_out, n_in):
        return {f"{prefix}.weight": normal(n_out, n_in), f"{prefix}.bias": normal(n_out)}

    w = {
        "embeddings.word_embeddings.weight": normal(config["vocab_size"], width),
        "embeddings.position_embeddings.weight": normal(config["max_position_embeddings"], width),
        "embeddings.token_type_embeddings.weight": normal(config["type_vocab_size"], width),
        **layer_norm("embeddings.LayerNorm", width),
    }
    if not electra:
        w.update(linear("pooler.dense", h, h))
    elif width != h:
        w.update(linear("embeddings_project", h, width))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name in ("query", "key", "value"):
            w.update(linear(f"{p}.attention.self.{name}", h, h))
        w.update(linear(f"{p}.attention.output.dense", h, h))
        w.update(layer_norm(f"{p}.attention.output.LayerNorm"))
        w.update(linear(f"{p}.intermediate.dense", inter, h))
        w.update(linear(f"{p}.output.dense", h, inter))
        w.update(layer_norm(f"{p}.output.LayerNorm"))
    return w


def write_vocab(path, vocab=VOCAB):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")


def write_hf_checkpoint(directory, config=CONFIG, seed=0):
    """config.json + model.safetensors + vocab.txt + tokenizer_config.json; returns the dir."""
    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    save_file(hf_weights(config, seed), os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}, f)
    write_vocab(os.path.join(directory, "vocab.txt"))
    return str(directory)
