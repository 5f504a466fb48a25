"""Distillation's transfer set: the training rows and the unlabeled rows, trained on as one split.

Each part stays what the token cache made of it (its blocks on disk, or arrays in memory); an
epoch draws from both at random in proportion to their sizes (tf.data's sample_from_datasets,
seeded per epoch as every training split is), so a batch mixes labelled and unlabelled rows as
one shuffled file of both would, and a resumed run sees the same batches.
"""

import dataclasses

import numpy as np
import tensorflow as tf


def split_off_unlabeled(tokenized: dict) -> tuple:
    """(the transfer set, or None without unlabeled rows; the unlabeled rows, or None): the
    unlabeled split taken out of `tokenized`, trained on and never evaluated or reported."""
    from trainer.data.splits import UNLABELED

    unlabeled = tokenized.pop(UNLABELED, None)
    return (TransferSplit((tokenized["train"], unlabeled)) if unlabeled else None), unlabeled


@dataclasses.dataclass
class TransferSplit:
    """The rows of `parts` (input_pipeline.TokenizedSplit or token_cache.CachedSplit), in order."""

    parts: tuple

    def __len__(self):
        return sum(len(part) for part in self.parts)

    @property
    def lengths(self) -> np.ndarray:
        return np.concatenate([part.lengths for part in self.parts])

    @property
    def full_lengths(self) -> np.ndarray:
        return np.concatenate([part.full_lengths for part in self.parts])

    @property
    def labels(self) -> np.ndarray:
        return np.concatenate([part.labels for part in self.parts])

    @property
    def real_tokens(self) -> int:
        return sum(part.real_tokens for part in self.parts)

    def examples(self, seed=None, shard=(0, 1)) -> tf.data.Dataset:
        """Every row once: in order without a seed; with one, each part shuffled as it shuffles
        itself and the parts drawn at random by their sizes."""
        datasets = [part.examples(seed=seed, shard=shard) for part in self.parts]
        if seed is None:
            out = datasets[0]
            for dataset in datasets[1:]:
                out = out.concatenate(dataset)
            return out
        sizes = np.asarray([len(part) for part in self.parts], np.float64)
        return tf.data.Dataset.sample_from_datasets(
            datasets, weights=(sizes / sizes.sum()).tolist(), seed=seed, stop_on_empty_dataset=False
        )
