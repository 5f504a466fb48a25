"""An independent BERT forward pass in numpy float64, and a writer of Google's checkpoint format.

The forward pass reads Hugging Face BertModel names (as tests/helpers/tiny_bert.py writes them) and
follows the BERT paper's equations directly, sharing no code with trainer.modeling.encoders: when a
loader transposes or reshapes a kernel the wrong way, the two disagree.
"""

import json
import math
import os

import numpy as np
import tiny_bert


def _gelu(x, approximate):
    if approximate:  # the tanh form of Google's modeling.py and Model Garden
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma + beta


def forward(weights, config, input_word_ids, input_mask, input_type_ids, gelu_approximate=False):
    """{"pooled_output", "sequence_output", "encoder_outputs"} as float64 arrays."""
    w = {name: np.asarray(value, np.float64) for name, value in weights.items()}
    eps = config.get("layer_norm_eps", 1e-12)
    heads = config["num_attention_heads"]
    batch, length = input_word_ids.shape
    head_size = config["hidden_size"] // heads

    def linear(x, prefix):
        return x @ w[f"{prefix}.weight"].T + w[f"{prefix}.bias"]

    def norm(x, prefix):
        return _layer_norm(x, w[f"{prefix}.weight"], w[f"{prefix}.bias"], eps)

    def split_heads(x):
        return x.reshape(batch, length, heads, head_size).transpose(0, 2, 1, 3)

    x = (
        w["embeddings.word_embeddings.weight"][input_word_ids]
        + w["embeddings.position_embeddings.weight"][:length]
        + w["embeddings.token_type_embeddings.weight"][input_type_ids]
    )
    x = norm(x, "embeddings.LayerNorm")
    key_is_padding = (np.asarray(input_mask) == 0)[:, None, None, :]
    layers = []
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (split_heads(linear(x, f"{p}.attention.self.{n}")) for n in ("query", "key", "value"))
        scores = np.where(key_is_padding, -np.inf, q @ k.transpose(0, 1, 3, 2) / math.sqrt(head_size))
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1)
        x = norm(x + linear(context, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
        inner = _gelu(linear(x, f"{p}.intermediate.dense"), gelu_approximate)
        x = norm(x + linear(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        layers.append(x)
    pooled = np.tanh(linear(x[:, 0], "pooler.dense"))
    return {"pooled_output": pooled, "sequence_output": x, "encoder_outputs": layers}


def google_names(hf_weights):
    """Hugging Face names -> Google's TF1 BERT names; Linear weights become [in, out] kernels."""
    renames = [
        ("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings"),
        ("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings"),
        ("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings"),
    ]
    out = {google: hf_weights[hf] for hf, google in renames}
    for name, value in hf_weights.items():
        if name in dict(renames):
            continue
        path = "bert/" + name.replace("encoder.layer.", "encoder/layer_").replace(".", "/")
        if "LayerNorm" in name:
            path = path.replace("/weight", "/gamma").replace("/bias", "/beta")
        elif name.endswith(".weight"):
            path, value = path.replace("/weight", "/kernel"), value.T
        out[path] = np.ascontiguousarray(value)
    return out


def write_google_checkpoint(directory, config=tiny_bert.CONFIG, seed=0):
    """bert_config.json + bert_model.ckpt.{index,data-*} + vocab.txt, like the small-BERT zips.

    The checkpoint also holds what a pre-training checkpoint holds besides the encoder (Adam
    slots, the masked-LM head, the global step), which a loader must skip.
    """
    import tensorflow as tf

    os.makedirs(directory, exist_ok=True)
    tensors = google_names(tiny_bert.hf_weights(config, seed))
    extras = {
        "bert/embeddings/word_embeddings/adam_m": np.zeros_like(tensors["bert/embeddings/word_embeddings"]),
        "cls/predictions/output_bias": np.zeros(config["vocab_size"], np.float32),
        "global_step": np.array(1000, np.int64),
    }
    tensors.update(extras)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(directory, "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tensors[n] for n in names],
    )
    google_config = {
        k: v for k, v in config.items() if k not in ("architectures", "model_type", "layer_norm_eps", "pad_token_id")
    }
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump(google_config, f, indent=2)
    tiny_bert.write_vocab(os.path.join(directory, "vocab.txt"))
    return str(directory)
