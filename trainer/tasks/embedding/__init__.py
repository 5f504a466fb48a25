"""Sentence embeddings: the encoder fine-tuned as a bi-encoder (Reimers and Gurevych 2019), each
text of a pair encoded alone into one vector, for search, similarity and clustering. The data
decides how it trains (--loss auto): pairs with a score so that their cosine follows it
(scored.py, CoSENT), pairs without one so that each text's pair is nearest among the batch's
(unscored.py, in-batch negatives). Its unit is a pair of texts encoded each alone (sides.py);
its export takes one text and returns its L2-normalized vector.
"""

from trainer.tasks.embedding.scored import ScoredPairs
from trainer.tasks.embedding.unscored import UnscoredPairs


class EmbeddingTask(ScoredPairs):
    """The kind `--task embedding` names: scored pairs' task, or the variant --loss trains."""

    @classmethod
    def settle(cls, config) -> None:
        """--loss auto: cosent when the training file has a score column (--label-column, or
        one named as a score), else multiple-negatives. A file that cannot be read leaves
        cosent: reading it later says why."""
        t, d = config.train, config.data
        if t.loss != "auto":
            return
        t.loss = cls.LOSS if d.label_column or cls._has_score_column(d) else UnscoredPairs.LOSS

    @classmethod
    def _has_score_column(cls, d) -> bool:
        from trainer import reading
        from trainer.errors import UserError

        if not d.training_file:
            return True
        try:
            first = next(reading.split_frames(d.training_file, "--training-file", 1, d.delimiter))
        except (UserError, OSError, StopIteration, ValueError):
            return True
        return any(reading.find_column(first, name) for name in cls.label_column_names)

    @classmethod
    def with_settings(cls, settings) -> ScoredPairs:
        """This kind's object (scored pairs, CoSENT), or UnscoredPairs' for --loss
        multiple-negatives."""
        variant = {v.LOSS: v for v in cls.variants()}.get(settings.get("loss"), cls)
        return variant()

    @classmethod
    def variants(cls) -> tuple:
        return (cls, UnscoredPairs)
