"""Hugging Face transformers (PyTorch) as the reference for the native encoder families.

Each family's checkpoint is written by transformers itself, with random weights at a tiny
config of that family's shape (or a published one, in bench/encoder_parity.py), so the native
encoder reads exactly the files a user's checkpoint gives it, and is compared with the PyTorch
forward that defines the architecture.
"""

import glob
import importlib
import os

import numpy as np


def families() -> dict:
    """{family: its fixture module}: every tests/reference_<family>.py, each defining
    `tiny_config()` (a transformers config) and `write_tokenizer(directory)` (the tokenizer files
    a checkpoint of that family ships)."""
    names = sorted(
        os.path.basename(path)[len("reference_") : -3]
        for path in glob.glob(os.path.join(os.path.dirname(__file__), "reference_*.py"))
    )
    return {name: importlib.import_module(f"reference_{name}") for name in names}


def write_checkpoint(family: str, directory, config=None, seed=0) -> str:
    """model.safetensors + config.json written by transformers, plus the tokenizer's files."""
    import torch
    import transformers

    fixture = families()[family]
    config = config or fixture.tiny_config()
    torch.manual_seed(seed)
    model = transformers.AutoModel.from_config(config)
    with torch.no_grad():  # LayerNorms away from 1/0, so a swapped gamma/beta shows
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or "norm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.3)
    model.save_pretrained(directory, safe_serialization=True)
    fixture.write_tokenizer(str(directory))
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


def features(ids, mask) -> dict:
    """The native encoder's inputs of token ids and a mask (lists), token types all 0."""
    ids, mask = np.array(ids, np.int32), np.array(mask, np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def max_difference(ours, reference, mask) -> float:
    """The largest absolute difference over real (unpadded) tokens."""
    keep = np.asarray(mask, bool)
    return float(np.max(np.abs(np.asarray(ours)[keep] - np.asarray(reference)[keep])))
