"""A tagger export's answers at the words of tagged sentences (trainer.evaluate, trainer.report).

The export splits a raw string into words itself (spaces, and each punctuation character a word:
tasks/tagging/word_spans.py), which need not be a tagged file's tokens: "U.S." is four of its
words. Each token of a sentence reads the tag probabilities of the export's word that starts at
its first character, as training reads a word's tag at its first piece. A token no export word
starts at (one beginning inside an export word, or a word the export gave no tag: one without
pieces) reads a uniform distribution: no answer, so it is scored as O (the first tag, the one a
tie gives) with the loss of a guess.
"""

import numpy as np

from trainer.errors import UserError


def word_probabilities(exported: dict, sentences) -> np.ndarray:
    """[N, W, tags] the probabilities of each sentence's words' tags (zeros past its last word),
    of a loaded export's outputs for the sentences' texts."""
    if "word_probabilities" not in exported:
        raise UserError(
            "--model-dir: this tagger was exported before taggers returned each "
            "word's tag probabilities; re-export it with this version to score it"
        )
    probabilities = np.asarray(exported["word_probabilities"], np.float64)
    tags = probabilities.shape[-1]
    out = np.zeros([len(sentences), max(len(s.words) for s in sentences), tags])
    for row, sentence in enumerate(sentences):
        starts = exported["word_start"][row][: int(exported["word_count"][row])]
        at = {int(start): word for word, start in enumerate(starts)}
        for word, (start, _) in enumerate(sentence.words):
            out[row, word] = probabilities[row, at[start]] if start in at else 1.0 / tags
    return out
