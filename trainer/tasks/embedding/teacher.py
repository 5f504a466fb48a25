"""Embeddings' distillation part (--teacher, --teacher-probabilities): the student learns the
teacher's vectors, as sentence-transformers' model-distillation recipe trains a smaller model on
a larger one's (examples/training/distillation/model_distillation.py): the squared distance of
each text's unit-length vector to the teacher's, with --unlabeled-file texts it learns from alone.

A teacher wider than the student is read in its principal axes, fitted on the training texts'
teacher vectors (the recipe's PCA), and the student learns the leading ones: as many as its
width, or as each of --embedding-dims. A teacher as wide as a student without nested dimensions
is learned as it is, so the student's vectors can be compared with the teacher's own.

Packed targets per row: the variant's plain labels (-1 on an unlabelled row: no class, no text
id, and weight 0 in the variant's loss), 1 or 0 whether the row has them, then the teacher's
unit-length vector of each text of the pair (not of a hard negative). The Keras side is
distill.py's.
"""

import numpy as np

from trainer.tasks.embedding.metrics import normalized
from trainer.tasks.parts import teacher_targets

VECTOR_COLUMNS = ("embedding", "pair_embedding")  # trainer.predict's: a pair's first and second text's
PCA_ROWS = 20_000  # teacher vectors the principal axes are fitted on (the recipe's 20,000 sentences)


class VectorDistillation(teacher_targets.Distillation):
    def __init__(self, task):
        super().__init__(task)
        self.label_width = None  # the variant's plain label columns: 1, or a pair's text ids
        self.label_dtype = None
        self.rotation = None  # float32 [T, T]: the teacher's principal axes, as columns
        self.width = None  # T: the teacher's vectors' width

    def columns(self, label_names) -> list:
        """trainer.predict's columns of an embedding model: each text's vector, and of a pair
        its second text's."""
        return list(VECTOR_COLUMNS[: self.sides])

    @property
    def sides(self) -> int:
        return min(self.task.sides, 2)

    def module(self):
        from trainer.tasks.embedding import distill

        return distill

    def pack(self, labels, teacher):
        """float32 [N, L + 1 + sides * T]; the training rows (packed first: teacher.teach)
        fit the principal axes."""
        vectors = self.outputs(teacher)
        if self.rotation is None:
            self.width, self.rotation = vectors.shape[2], principal_axes(vectors.reshape(-1, vectors.shape[2]))
        if labels is None:
            plain, has = np.full([len(vectors), self.label_width or 1], -1.0), 0.0
        else:
            labels = np.asarray(labels)
            self.label_dtype = labels.dtype
            plain, has = labels.reshape(len(labels), -1).astype(np.float64), 1.0
            self.label_width = plain.shape[1]
        flags = np.full([len(vectors), 1], has)
        return np.concatenate([plain, flags, vectors.reshape(len(vectors), -1)], axis=1).astype(np.float32)

    def is_packed(self, labels) -> bool:
        width = None if self.width is None else self.label_width + 1 + self.sides * self.width
        return width is not None and labels.ndim == 2 and labels.shape[1] == width

    def unpack(self, packed):
        plain = np.asarray(packed)[:, : self.label_width].astype(self.label_dtype)
        return plain[:, 0] if self.label_width == 1 else plain

    def loss(self, temperature: float, alpha: float):
        """alpha of the variant's loss on the labelled rows, 1 - alpha of the squared distance
        to the teacher's vectors; `temperature` has nothing to soften in a vector."""
        from trainer.tasks.embedding import distill

        return distill.DistilledVectors(
            self.task.loss(), alpha, self.label_width, self.sides, self.rotation, rotate=bool(self.task.dims)
        )

    def metrics(self) -> list:
        from trainer.tasks.embedding import distill

        return [distill.on_labelled_rows(metric, self.label_width) for metric in self.task.keras_metrics()]

    def outputs(self, teacher):
        """The teacher's vectors [N, sides, T]: the variant scores them as the student's."""
        return normalized(np.asarray(teacher, np.float64).reshape(len(teacher), self.sides, -1))

    def agreement(self, teacher, outputs):
        """None: vectors decide nothing (the variant's metrics of both are side by side)."""
        return None

    def check_width(self, width: int) -> None:
        """A student wider than its teacher has no target for its other dimensions: one line."""
        from trainer.errors import UserError

        if self.width is not None and self.width < width:
            raise UserError(
                f"--teacher: the teacher's vectors are {self.width} wide, narrower than the student's {width}: "
                "distil into a narrower encoder, or set --embedding-dims to at most the teacher's width"
            )


def principal_axes(vectors) -> np.ndarray:
    """float32 [T, T]: the principal axes of `vectors` [M, T] (the first PCA_ROWS), as columns,
    largest variance first, each signed so that its largest entry is positive (the same axes
    whenever they are fitted again: a resumed run)."""
    sample = np.asarray(vectors[:PCA_ROWS], np.float64)
    centred = sample - sample.mean(axis=0)
    variances, axes = np.linalg.eigh(centred.T @ centred)
    axes = axes[:, np.argsort(variances)[::-1]]
    signs = np.sign(axes[np.argmax(np.abs(axes), axis=0), np.arange(axes.shape[1])])
    return (axes * np.where(signs == 0, 1.0, signs)).astype(np.float32)
