"""The splits of a token-classification run: files of tagged sentences (tasks/tagging/files.py),
read whole, carved and checked as a sentence task's CSV splits are (splits.load_datasets).

Tagged files are small beside a sentence task's CSVs (WikiANN's 20,000 sentences are 1.5 MB),
and every sentence's words and tags are needed again to score entities, so they stay in memory:
a split holds its sentences, and its labels are the tag ids of each sentence's words (-1 past
its last word), the entity scores' truth.
"""

import dataclasses
import logging

import numpy as np
import pandas as pd

from trainer.config import Config
from trainer.data import leakage
from trainer.data.labels import LabelSpec
from trainer.data.splits import Datasets, Split, dry_run_rows, head, stratified_split
from trainer.errors import UserError
from trainer.tasks.tagging import files
from trainer.tasks.tagging import tags as iob2

log = logging.getLogger("trainer")

TEXT, TAGS = "text", "tags"  # what metrics.json and the log call the sentence and its tags


@dataclasses.dataclass
class TaggedSplit(Split):
    """A split's sentences (tasks.tagging.files.Sentence, an object array) beside Split's
    labels (int32 [N, W] tag ids), positions and hashes."""

    sentences: np.ndarray = None

    def subset(self, index: np.ndarray) -> "TaggedSplit":
        return dataclasses.replace(super().subset(index), sentences=self.sentences[index])


@dataclasses.dataclass
class TaggedDatasets(Datasets):
    """Datasets of tagged sentences: the texts are the sentences', not a file's column."""

    def describe(self, task) -> str:
        """No column: a tagged file's sentences are read by its format."""
        return f"tagged sentences, {task.describe_labels(self.labels)}"

    def read_texts(self, *names: str) -> dict[str, tuple]:
        splits = self.splits()
        return {name: (np.array([s.text for s in splits[name].sentences], dtype=object), None) for name in names}


def load(config: Config, task) -> TaggedDatasets:
    """Every split of tagged sentences the config names, their tags checked and encoded."""
    d = config.data
    leakage.check_held_out_files(
        d.training_file, {"--validation-file": d.validation_file, "--testing-file": d.testing_file}
    )
    read = {
        "train": (d.training_file, "--training-file"),
        "validation": (d.validation_file, "--validation-file"),
        "test": (d.testing_file, "--testing-file"),
    }
    tagged = {name: _read(spec, flag) for name, (spec, flag) in read.items() if spec}
    spec = tag_spec(tagged["train"], d.training_file, "--training-file")
    splits = {name: tagged_split(t, read[name][0], spec) for name, t in tagged.items()}
    train = splits["train"]
    validation = splits.get("validation")
    if validation is None:
        train, validation = stratified_split(
            train, d.validation_fraction, config.train.seed, "validation split", spec.names, task
        )
    if d.train_fraction < 1.0:
        train, _ = stratified_split(
            train, 1.0 - d.train_fraction, config.train.seed, "--train-fraction subset", spec.names, task
        )
    test = splits.get("test")
    if config.train.dry_run:
        rows = dry_run_rows(config)
        train, validation = head(train, rows), head(validation, rows)
        test = head(test, rows) if test is not None else None
    datasets = TaggedDatasets(train, validation, test, spec, TEXT, TAGS)
    leakage.report_overlaps({name: split.hashes for name, split in datasets.splits().items()})
    return datasets


def tag_spec(tagged, spec: str, flag: str) -> LabelSpec:
    """The tags a model of the training sentences `tagged` predicts: O, then B- and I- of each
    type they tag; sentences that tag no entity stop."""
    types = tagged.types()
    if not types:
        raise UserError(f"{flag}: {spec} tags no entity (every tag is O): there is nothing to learn")
    return LabelSpec("tags", iob2.tag_names(types))


def _read(spec: str, flag: str):
    tagged = files.read(spec, flag)
    if tagged.repaired:
        log.warning(
            "%s: %d I- tags continued no entity of their type and were read as B- "
            "(IOB1's way of starting one); the first: %s",
            flag,
            tagged.repaired,
            tagged.first_repair,
        )
    return tagged


def tagged_split(tagged, spec: str, labels: LabelSpec) -> TaggedSplit:
    """A split's sentences and tag ids; a tag of a type the training file never uses stops."""
    index = {tag: number for number, tag in enumerate(labels.names)}
    sentences = tagged.sentences
    ids = np.full([len(sentences), max(len(s.tags) for s in sentences)], iob2.UNTAGGED, np.int32)
    for row, sentence in enumerate(sentences):
        for word, tag in enumerate(sentence.tags):
            if tag not in index:
                raise UserError(
                    f"{sentence.at(word)}: tag {tag!r} names a type the training "
                    f"file never tags ({', '.join(labels.names[1::2])[:200]}); the "
                    f"model cannot learn it"
                )
            ids[row, word] = index[tag]
    return _split(ids, sentences, spec)


def untagged_split(sentences, spec: str) -> TaggedSplit:
    """--unlabeled-file's sentences: tag id UNLABELLED on each word (distillation's marker of a
    word without a tag), UNTAGGED past its last."""
    from trainer.tasks.tagging.distill import UNLABELLED

    ids = np.full([len(sentences), max(len(s.words) for s in sentences)], iob2.UNTAGGED, np.int32)
    for row, sentence in enumerate(sentences):
        ids[row, : len(sentence.words)] = UNLABELLED
    return _split(ids, sentences, spec)


def _split(ids: np.ndarray, sentences, spec: str) -> TaggedSplit:
    kept = np.empty(len(sentences), dtype=object)
    kept[:] = sentences
    hashes = leakage.text_hashes(pd.DataFrame({TEXT: [s.text for s in sentences]}), [TEXT])
    source = ",".join(sorted({s.file for s in sentences}))
    return TaggedSplit(ids, source, spec, np.arange(len(sentences), dtype=np.int64), hashes, sentences=kept)
