"""--encoder-layers K: a shallower encoder, K of a pretrained encoder's layers, evenly spaced.

A smaller, faster student is a pretrained encoder with fewer layers, each starting from the
weights of the layer it replaces: DistilBERT's 6-layer student took every other layer of
BERT-base's 12 (Sanh et al. 2019, "DistilBERT", section 3). Evenly spaced with the first and
the last kept, np.linspace(0, L - 1, K), is that choice for any K: 12 -> 6 keeps 0, 2, 4, 7,
9, 11. The embeddings (and a family's shared position tables) are kept whole.

Works on the canonical weight names every family uses (layers.py's contract:
"transformer/layer_{i}/..."); a family whose config says something per layer (ModernBERT's
attention kinds) adds its part through its record's `shallower`.
"""

import dataclasses
import re
from collections.abc import Sequence

import numpy as np

from trainer.errors import UserError

_LAYER = re.compile(r"^transformer/layer_(\d+)/")


def evenly_spaced(total: int, keep: int) -> tuple[int, ...]:
    """The indices of `keep` of `total` layers, first and last included (for keep >= 2)."""
    return tuple(int(i) for i in np.round(np.linspace(0, total - 1, keep)))


def renumbered(weights: dict[str, np.ndarray], indices: Sequence[int]) -> dict[str, np.ndarray]:
    """The weights of the kept layers under their new numbers (layer indices[j] -> j); every
    other layer's weights dropped, everything outside the layers kept."""
    new_index = {old: new for new, old in enumerate(indices)}
    out = {}
    for name, value in weights.items():
        match = _LAYER.match(name)
        if match is None:
            out[name] = value
        elif int(match.group(1)) in new_index:
            out[f"transformer/layer_{new_index[int(match.group(1))]}/{name[match.end() :]}"] = value
    return out


def shallower(config, weights: dict[str, np.ndarray], indices: Sequence[int]):
    """(config, weights) of the kept layers: what most families need (their layers are alike)."""
    return dataclasses.replace(config, num_layers=len(indices)), renumbered(weights, indices)


def described(total: int, keep: int) -> str:
    """What --encoder-layers did, for the run's log (issue 64: a student's log never said)."""
    kept = ", ".join(map(str, evenly_spaced(total, keep)))
    return f"{keep} of {total} layers kept (--encoder-layers {keep}: layers {kept})"


def keep_layers(checkpoint, keep: int):
    """`checkpoint` (checkpoints.Checkpoint) with `keep` of its layers, evenly spaced; itself
    when it has that many. A UserError when it has fewer."""
    total = checkpoint.config.num_layers
    if keep > total:
        raise UserError(f"--encoder-layers: {keep} is more than the {total} layers of {checkpoint.source}")
    if keep == total:
        return checkpoint
    indices = evenly_spaced(total, keep)
    config, weights = (checkpoint.family.shallower or shallower)(checkpoint.config, checkpoint.weights, indices)
    return dataclasses.replace(checkpoint, config=config, weights=weights, kept_layers=indices)
