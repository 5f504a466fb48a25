"""Sentence embeddings: the encoder fine-tuned as a bi-encoder (Reimers and Gurevych 2019), each
text of a pair encoded alone into one vector, for search, similarity and clustering. The data
decides how it trains (--loss auto): pairs with a score so that their cosine follows it
(scored.py, CoSENT), pairs without one so that each text's pair is nearest among the batch's
(unscored.py, in-batch negatives), texts with a class so that texts of a class are nearer each
other than others (labelled.py, supervised contrastive). Its unit is a pair of texts encoded each alone (sides.py);
its export takes one text and returns its L2-normalized vector.
"""

from trainer.tasks.embedding.labelled import LabelledTexts
from trainer.tasks.embedding.scored import ScoredPairs
from trainer.tasks.embedding.unscored import UnscoredPairs


def dims_of(value: str | None) -> tuple:
    """--embedding-dims' numbers ("384,256" -> (384, 256)); () for None. Parts that are not
    numbers are left out here: check_loss refuses the value, naming it."""
    return tuple(int(d) for d in (value or "").split(",") if d.strip().isdigit())


class EmbeddingTask(ScoredPairs):
    """The kind `--task embedding` names: scored pairs' task, or the variant --loss trains."""

    @classmethod
    def settle(cls, config) -> None:
        """--loss auto, by the training file's columns: a pair of texts and a score column
        (--label-column, or one named as a score) cosent, a pair without one
        multiple-negatives, single texts with a class column supervised-contrastive. A file
        that cannot be read, or whose columns fit none, leaves cosent: reading it later says
        why. Pairs without a score take a column named as a hard negative (--negative-column)."""
        t, d = config.train, config.data
        if t.loss != "auto" and (t.loss != UnscoredPairs.LOSS or d.negative_column is not None):
            return  # nothing left to the file
        header = _header(d)
        if t.loss == "auto":
            t.loss = cls._loss_of(d, header)
        if t.loss == UnscoredPairs.LOSS and d.negative_column is None and header is not None:
            from trainer import reading

            found = (reading.find_column(header, name) for name in reading.NEGATIVE_COLUMNS)
            d.negative_column = next((column for column in found if column), None)

    @classmethod
    def _loss_of(cls, d, header) -> str:
        from trainer import reading
        from trainer.errors import UserError

        if header is None:  # the sample posts, or a file reading will refuse
            return cls.LOSS
        try:
            pair = reading.pick_text_columns(header, d.text_column, d.text_pair_column)[1]
        except UserError:
            return cls.LOSS
        if pair is not None:
            scored = d.label_column or any(reading.find_column(header, name) for name in cls.label_column_names)
            return cls.LOSS if scored else UnscoredPairs.LOSS
        labelled = d.label_column or any(reading.find_column(header, name) for name in LabelledTexts.label_column_names)
        return LabelledTexts.LOSS if labelled else cls.LOSS

    @classmethod
    def with_settings(cls, settings) -> ScoredPairs:
        """This kind's object (scored pairs, CoSENT), or the variant of the run's --loss."""
        task = {v.LOSS: v for v in cls.variants()}.get(settings.get("loss"), cls)()
        task.dims = dims_of(settings.get("embedding_dims"))
        return task

    def scoring(self, data) -> ScoredPairs:
        """The variant a file of these columns trains (settle's choice): trainer.evaluate
        scores an embedding model on retrieval, kNN accuracy or correlation by its file."""
        return self.with_settings({"loss": self._loss_of(data, _header(data))})

    @classmethod
    def variants(cls) -> tuple:
        return (cls, UnscoredPairs, LabelledTexts)


def _header(d):
    """The training file's first row as a frame (its columns), or None: no file (the sample
    posts), or one that cannot be read (reading it later says why)."""
    from trainer import reading
    from trainer.errors import UserError

    if not d.training_file:
        return None
    try:
        return next(reading.split_frames(d.training_file, "--training-file", 1, d.delimiter))
    except (UserError, OSError, StopIteration, ValueError):
        return None
