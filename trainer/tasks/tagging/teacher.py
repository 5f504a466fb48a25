"""The teacher stage's rows when they are tagged sentences (the unit's `teacher`): the five names
trainer.training.teacher asks of them (`noun`, `suffix`, `unlabeled`, `values`, `write`:
tasks/units/text_teacher.py has the same five for texts), over teacher_file.py's file of each
word's tag probabilities; and what a --teacher tagger's export writes in that format.
"""

import json
import logging
from collections.abc import Sequence

import numpy as np

from trainer.data import splits as splits_lib
from trainer.errors import UserError
from trainer.tasks.tagging import teacher_file as tagged_teacher

log = logging.getLogger("trainer")

noun, suffix = "sentences", "jsonl"
PREDICT_BATCH = 64
DIGITS = 5  # a probability's decimals in a model teacher's file (5e-6 at most off)


def unlabeled(spec: str, datasets):
    """--unlabeled-file's sentences, none a validation or test sentence."""
    held_out = {
        name: {tagged_teacher.key(s) for s in split.sentences}
        for name, split in datasets.labelled().items()
        if name != splits_lib.TRAIN
    }
    return tagged_teacher.load_unlabeled(spec, held_out)


def values(path: str, datasets, task, flag: str) -> tuple:
    """({"train", "unlabeled": the teacher's values [N, W, C]}, the validation sentences' or
    None when the file lacks some). The validation values stay per word here; the tokenize
    stage aligns them to tokens, as it aligns the tags (sentences.TaggedSentences.tokenize)."""
    teacher = tagged_teacher.read(path, task.distillation.columns(datasets.labels.names), flag)
    matched = lambda split, name: tagged_teacher.match(  # noqa: E731
        teacher, split.sentences, split.labels.shape[1], name, task.distillation.problem, flag
    )
    out = {
        name: matched(split, name)
        for name, split in datasets.splits().items()
        if name in (splits_lib.TRAIN, splits_lib.UNLABELED)
    }
    if not tagged_teacher.covers(teacher, datasets.validation.sentences):
        log.info(
            "distillation: %s lacks some validation sentences: the teacher's validation metrics are not reported",
            teacher.source,
        )
        return out, None
    return out, matched(datasets.validation, splits_lib.VALIDATION)


def write(model_dir: str, datasets, path: str, log_every_seconds: float, task) -> None:
    """A --teacher tagger's file of every training, unlabeled and validation sentence."""
    import time

    from trainer import progress
    from trainer.serving import variants

    started = time.monotonic()
    model = variants.load(model_dir, "float32")
    sentences = {
        name: split.sentences
        for name, split in datasets.splits().items()
        if name in (splits_lib.TRAIN, splits_lib.UNLABELED, splits_lib.VALIDATION)
    }
    total = sum(len(s) for s in sentences.values())
    log.info(
        "teacher: %s loaded in %s; tagging %d sentences", model_dir, progress.clock(time.monotonic() - started), total
    )
    meter = progress.Progress("teacher tagged", log_every_seconds, total=total)
    done = write_model_file(
        model, model_dir, sentences, task.distillation.columns(datasets.labels.names), path, meter, PREDICT_BATCH, task
    )
    log.info(
        "teacher: %d sentences in %s (%.1f sentences/s), written to %s",
        done,
        progress.clock(meter.seconds()),
        done / max(meter.seconds(), 1e-9),
        path,
    )


def write_model_file(
    model,
    model_dir: str,
    split_sentences: dict[str, np.ndarray],
    names: Sequence[str],
    path: str,
    meter,
    batch: int,
    task,
) -> int:
    """A tagger export's probabilities for every word of `split_sentences` ({split: sentences}),
    written to `path` in the teacher file's format (atomically); returns the sentences written.
    Each of the run's words takes the probabilities of the teacher's word it starts in (the
    export splits words itself, punctuation apart); a word past the teacher's
    --max-seq-length is null."""
    from trainer.inference import loaded_model
    from trainer.serving import predict_file

    order, done = tag_order(model, model_dir, names, task), 0
    with predict_file.written_output(path, "jsonl") as handle:
        for sentences in split_sentences.values():
            for start in range(0, len(sentences), batch * 16):
                part = sentences[start : start + batch * 16]
                out = loaded_model.predict_outputs(
                    model,
                    [s.text for s in part],
                    batch,
                    wanted=("word_start", "word_end", "word_probabilities", "word_count"),
                )
                handle.write("".join(_line(s, out, row, order, names) for row, s in enumerate(part)))
                done += len(part)
                meter.update(done)
    return done


def tag_order(model, model_dir: str, names: Sequence[str], task) -> list:
    """The column of each of the run's tags among the teacher's word_probabilities; a model
    that is no tagger (`task`: the run's kind), was exported without word probabilities, or
    tags other types, is refused before it reads every sentence."""
    from trainer.inference import loaded_model

    exported = loaded_model.task_of(model)
    if exported.name != task.name:
        raise UserError(
            f"--teacher: {model_dir} is a {exported.name} model, not a tagger: a "
            f"tagger's teacher is a {task.name} run's export"
        )
    try:
        found = loaded_model.predict_outputs(model, ["a"], 1, wanted=("tag_names",))["tag_names"][0]
    except KeyError:  # a tagger exported before its word probabilities were
        raise UserError(
            f"--teacher: {model_dir} returns no word probabilities (it was exported "
            f"before they were): train the teacher again with this version"
        ) from None
    found = [t.decode() for t in found]
    if sorted(found) != sorted(names):
        raise UserError(
            f"--teacher: {model_dir} tags {found}, but this run's data tags "
            f"{list(names)}: the teacher was trained on other entity types"
        )
    return [found.index(name) for name in names]


def _line(sentence, out: dict, row: int, order: list, names: Sequence[str]) -> str:
    count = int(out["word_count"][row])
    starts, ends = out["word_start"][row][:count], out["word_end"][row][:count]
    probabilities = out["word_probabilities"][row][:count][:, order]
    given = []
    for a, _ in sentence.words:
        word = int(np.searchsorted(starts, a, side="right")) - 1
        inside = word >= 0 and a < ends[word]
        given.append(
            {
                name: round(float(p), DIGITS)
                for name, p in zip(names, probabilities[word])
                if round(float(p), DIGITS) > 0
            }
            if inside
            else None
        )
    tokens = [sentence.text[a:b] for a, b in sentence.words]
    return json.dumps({"tokens": tokens, "probabilities": given}, ensure_ascii=False) + "\n"
