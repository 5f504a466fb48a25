"""Hugging Face transformers (PyTorch) as the reference for the native encoder families.

Each family's checkpoint is written by transformers itself, with random weights at a tiny
config of that family's shape (or a published one, in bench/encoder_parity.py), so the native
encoder reads exactly the files a user's checkpoint gives it, and is compared with the PyTorch
forward that defines the architecture.
"""
import json
import os

import numpy as np

# Words of the tiny fixtures' sentences (tests/conftest.py), for the WordPiece families.
WORDS = ["i", "love", "hate", "this", "movie", "it", "is", "was", "not", "good", "bad", "great",
         "awful", "fine", "ok", "the", "so", "very", "meh", "a", "##s", "!", ".", ",", "?"]
MPNET_VOCAB = ["<s>", "<pad>", "</s>", "<unk>", "[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS, "<mask>"]


def tiny_config(family: str, **overrides):
    """A transformers config of `family` small enough for the default suite."""
    import transformers

    # layer_norm_eps as published (transformers' own default, 1e-12, is BERT's): the int8
    # copy stores its first part in float16, where 1e-12 is 0, and MPNet's padding rows are 0.
    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, initializer_range=0.2, layer_norm_eps=1e-5)
    if family == "mpnet":
        config = transformers.MPNetConfig(vocab_size=len(MPNET_VOCAB), max_position_embeddings=66,
                                          pad_token_id=1, **common)
    else:
        raise ValueError(family)
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


def write_checkpoint(family: str, directory, config=None, seed=0) -> str:
    """model.safetensors + config.json written by transformers, plus the tokenizer's files."""
    import torch
    import transformers

    config = config or tiny_config(family)
    torch.manual_seed(seed)
    model = transformers.AutoModel.from_config(config)
    with torch.no_grad():  # LayerNorms away from 1/0, so a swapped gamma/beta shows
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or "norm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.3)
    model.save_pretrained(directory, safe_serialization=True)
    if family == "mpnet":
        with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(MPNET_VOCAB) + "\n")
        with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": True, "tokenizer_class": "MPNetTokenizer"}, f)
    return str(directory)


def hidden_states(directory, input_ids, attention_mask, token_type_ids=None) -> dict:
    """The reference forward in float32: {"sequence_output", "pooled_output" (if any)}."""
    import torch
    import transformers

    model = transformers.AutoModel.from_pretrained(directory).eval()
    kwargs = dict(input_ids=torch.tensor(input_ids), attention_mask=torch.tensor(attention_mask))
    if token_type_ids is not None:
        kwargs["token_type_ids"] = torch.tensor(token_type_ids)
    with torch.no_grad():
        outputs = model(**kwargs)
    result = {"sequence_output": outputs.last_hidden_state.numpy()}
    if getattr(outputs, "pooler_output", None) is not None:
        result["pooled_output"] = outputs.pooler_output.numpy()
    return result


def fast_tokenizer(directory):
    import transformers

    return transformers.AutoTokenizer.from_pretrained(directory)


def max_difference(ours, reference, mask) -> float:
    """The largest absolute difference over real (unpadded) tokens."""
    keep = np.asarray(mask, bool)
    return float(np.max(np.abs(np.asarray(ours)[keep] - np.asarray(reference)[keep])))
