"""A teacher's tag probabilities for each word of tagged sentences (token classification's
distillation), and --unlabeled-file's untagged sentences.

The teacher file is JSON Lines, a sentence per line: its `tokens` (the words, as the training
file's), and `probabilities`, one entry per token: an object {tag: probability} over the run's
IOB2 tags (a tag left out is 0; the word's must sum to 1), or null for a word the teacher did
not tag. An LLM's labels are written so; a `--teacher` tagger's export writes the same file
(tasks/tagging/teacher.py), so both teachers are one path, as the sentence tasks' are
(data/teacher_file.py). Sentences are matched by their words joined by single spaces: the file
may hold them in any order, more of them than the run needs, and one twice (its first counts).

--unlabeled-file for a tagger is JSON Lines with `tokens` per sentence (any `tags` are not
read): sentences exactly a validation or test sentence are dropped, as unlabeled.py drops texts.
"""

import dataclasses
import logging
from collections.abc import Callable, Sequence

import numpy as np

from trainer import reading, storage
from trainer.errors import UserError

log = logging.getLogger("trainer")

FLAG, UNLABELED_FLAG = "--teacher-probabilities", "--unlabeled-file"


@dataclasses.dataclass
class TaggedTeacherFile:
    source: str
    rows: dict[str, tuple]  # sentence key -> (values float32 [W, C], "FILE line N")


def key(sentence) -> str:
    """A sentence's words joined by single spaces: how a teacher's row finds it."""
    return " ".join(sentence.text[a:b] for a, b in sentence.words)


def read(spec: str, names: Sequence[str], flag: str = FLAG) -> TaggedTeacherFile:
    """Every sentence of the files of `spec`, its words' probabilities in the order of `names`
    (the run's tags); a tag the run does not have, or a malformed row, stops naming its line."""
    index = {name: i for i, name in enumerate(names)}
    rows = {}
    for where, record in _records(
        spec, flag, 'a tagger\'s teacher file is JSON Lines with "tokens" and "probabilities" per sentence'
    ):
        tokens = _tokens(record, where, flag, ("tokens", "probabilities"))
        sentence_key = " ".join(tokens)
        if sentence_key not in rows:
            rows[sentence_key] = (_values(record["probabilities"], len(tokens), index, where, flag), where)
    if not rows:
        raise UserError(f"{flag}: {spec} holds no sentence")
    return TaggedTeacherFile(spec, rows)


def _records(spec: str, flag: str, expected: str):
    """("FILE line N", record) of every JSON Lines record of the files of `spec`; a file of
    another format stops, saying what was `expected`."""
    for path in storage.expand_paths(spec, flag):
        if reading.file_format(path, flag, compressed=True) != "jsonl":
            raise UserError(f"{flag}: {path}: {expected}")
        for number, record in reading.json_records(reading.lines(path), path):
            yield f"{path} line {number}", record


def _tokens(record, where: str, flag: str, needed: tuple) -> list:
    if not isinstance(record, dict) or not set(needed) <= set(record):
        shown = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise UserError(f"{flag}: {where}: a sentence needs {' and '.join(map(repr, needed))}; this one has {shown}")
    tokens = record["tokens"]
    if not (isinstance(tokens, list) and tokens and all(isinstance(t, str) for t in tokens)):
        raise UserError(f'{flag}: {where}: "tokens" must be a non-empty list of strings')
    blank = [t for t in tokens if not t.strip() or t != t.strip()]
    if blank:
        raise UserError(f"{flag}: {where}: token {blank[0]!r} is empty or has spaces around it")
    return tokens


def _values(probabilities, words: int, index: dict, where: str, flag: str) -> np.ndarray:
    """float32 [words, tags] of a row's per-token objects (null: a row of 0)."""
    if not isinstance(probabilities, list) or len(probabilities) != words:
        count = len(probabilities) if isinstance(probabilities, list) else "no list of"
        raise UserError(
            f"{flag}: {where}: {words} tokens but {count} probabilities (one "
            f"object {{tag: probability}} or null per token)"
        )
    values = np.zeros([words, len(index)], np.float32)
    for word, given in enumerate(probabilities):
        if given is None:
            continue
        if not isinstance(given, dict):
            raise UserError(
                f"{flag}: {where}: token {word + 1}'s probabilities must be an "
                f"object {{tag: probability}} or null, not {given!r}"
            )
        for tag, value in given.items():
            if tag not in index:
                raise UserError(
                    f"{flag}: {where}: token {word + 1} names tag {tag!r}, which "
                    f"this run's data does not have ({', '.join(index)})"
                )
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"{flag}: {where}: token {word + 1}'s probability of {tag} is {value!r}, not a number")
            values[word, index[tag]] = value
    return values


def match(
    teacher: TaggedTeacherFile, sentences, width: int, split: str, problem: Callable, flag: str = FLAG
) -> np.ndarray:
    """float32 [N, width, C]: the teacher's values of each sentence's words, NaN past its last
    word; checked by `problem` (the task's Distillation.problem). A sentence the file lacks stops, with
    their count and the first one's words."""
    keys = [key(s) for s in sentences]
    missing = [k for k in keys if k not in teacher.rows]
    if missing:
        shown = missing[0] if len(missing[0]) <= 80 else missing[0][:77] + "..."
        raise UserError(
            f"{flag}: {teacher.source} has no row for {len(missing)} of the "
            f"{len(keys)} {split} sentences, e.g. {shown!r}"
        )
    columns = next(iter(teacher.rows.values()))[0].shape[1]
    out = np.full([len(keys), width, columns], np.nan, np.float32)
    for row, sentence_key in enumerate(keys):
        values = teacher.rows[sentence_key][0]
        out[row, : len(values)] = values
    found = problem(out)
    if found is not None:
        row, reason = found
        raise UserError(f"{flag}: {teacher.rows[keys[row]][1]}: {reason}")
    return out


def covers(teacher: TaggedTeacherFile, sentences) -> bool:
    """Whether the file has a row for every sentence (the validation ones: the teacher scored)."""
    return all(key(s) in teacher.rows for s in sentences)


def load_unlabeled(spec: str, held_out: dict[str, set]):
    """--unlabeled-file's sentences as a TaggedSplit (tag ids UNLABELLED on their words until
    the teacher's are packed in), without those whose words `held_out` ({split: keys}) has."""
    from trainer.tasks.tagging import files
    from trainer.tasks.tagging.splits import untagged_split

    sentences, dropped, total = [], 0, 0
    shown = set().union(*held_out.values())
    for where, record in _records(
        spec, UNLABELED_FLAG, 'a tagger\'s unlabeled sentences are JSON Lines with "tokens" per sentence'
    ):
        tokens = _tokens(record, where, UNLABELED_FLAG, ("tokens",))
        sentence = files.joined(tokens, ("O",) * len(tokens), where)
        total += 1
        if key(sentence) in shown:
            dropped += 1
        else:
            sentences.append(sentence)
    if not sentences:
        raise UserError(f"{UNLABELED_FLAG}: {spec} holds no sentence that is not a validation or test sentence")
    log.info(
        "unlabeled sentences: %d of %d of %s kept (%d a validation or test sentence exactly, dropped)",
        len(sentences),
        total,
        spec,
        dropped,
    )
    return untagged_split(sentences, spec)
