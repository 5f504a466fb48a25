"""Files of tagged sentences for token classification, read into raw strings with character
offsets: CoNLL, and JSON Lines of token lists or of character spans.

- **CoNLL** (`.conll`, `.iob`, optionally `.gz`): a token and its tag per line, the tag in the
  last of its tab- or space-separated columns (CoNLL-2003's four columns read as WikiANN's two),
  a blank line between sentences, `-DOCSTART-` lines skipped. U+FEFF, a byte order mark left
  inside a file by joining files (WNUT-17's dev set holds two, one as a whole line), is dropped.
  CoNLL data often ships as `.txt` or `.tsv` (issue 64): this task reads those as CoNLL too;
  `--task auto` does not guess (a `.tsv` is a table to the other kinds), and says so when such a
  file looks like CoNLL (`holds_tagged_sentences`).
- **JSON Lines with `tokens` and `tags`**: one sentence per line, the two lists word for word.
- **JSON Lines with `text` and `spans`** (`start`, `end`, `label`: what labelling tools such as
  Label Studio and doccano export): the text as given; its words are its runs of non-space
  characters, cut where a span starts or ends, so every span is whole words.

Token lists become one string, the tokens joined by single spaces, so every sentence is a raw
string and the offsets of its words and entities index it, as they will index a user's text at
prediction. Tags are IOB2 (tasks.tagging.tags): anything else stops reading naming the file,
line and token; an `I-X` that continues nothing is read as `B-X` (IOB1's way of starting an
entity), and the reader returns how many it repaired and where the first was, for the log. A
message names a word as the package names a cell, `FILE line N, token 'T'`, N the word's own
line as an editor numbers it (a CoNLL sentence spans lines).
"""

import dataclasses
import os
import re
from collections.abc import Sequence

from trainer import reading, storage
from trainer.errors import UserError
from trainer.tasks.tagging import tags as iob2

# Extensions CoNLL data also ships with, read as CoNLL by this task only.
CONLL_TOO = (".txt", ".tsv")
# A tagged file's formats, in messages.
_JSON = ", ".join(ext for ext, fmt in reading.FORMATS.items() if fmt == "jsonl")
FORMATS_HELP = (
    f"CoNLL ({', '.join(reading.CONLL_SUFFIXES)}; {' and '.join(CONLL_TOO)} read as "
    f"CoNLL too) or JSON Lines ({_JSON}) of tokens and tags, or of text and spans, "
    f"each optionally followed by {reading.COMPRESSED}"
)
# How many lines of a .tsv `holds_tagged_sentences` reads to tell CoNLL from a table.
_SNIFFED_LINES = 5
_WORDS = re.compile(r"\S+")
_BOM = "\ufeff"


@dataclasses.dataclass(frozen=True)
class Sentence:
    text: str
    words: tuple[tuple[int, int], ...]  # (start, end) character offsets into `text`
    tags: tuple[str, ...]  # one IOB2 tag per word
    where: str  # "FILE line N": where it starts, for messages
    lines: tuple[int, ...] = ()  # each word's line (CoNLL); () when all are on `where`'s

    @property
    def file(self) -> str:
        return self.where.rsplit(" line ", 1)[0]

    def at(self, position: int) -> str:
        """ "FILE line N, token 'T'": where word `position` is, for messages."""
        where = f"{self.file} line {self.lines[position]}" if self.lines else self.where
        return f"{where}, token {word(self, position)!r}"


@dataclasses.dataclass
class Tagged:
    sentences: list[Sentence]
    repaired: int = 0  # I-X tags read as B-X
    first_repair: str = ""  # "FILE line N, token 'T'" of the first
    # With read(keep_sources=True), each sentence's source as trainer.prepare writes it back:
    # its CoNLL lines, or its JSON record
    sources: list = dataclasses.field(default_factory=list)

    def types(self) -> list[str]:
        """The entity types the sentences' tags name, sorted."""
        return sorted({tag[2:] for s in self.sentences for tag in s.tags if tag != iob2.OUTSIDE})


def extension(path: str) -> str:
    """The extension of `path`, lower case, before a `.gz`."""
    name = path.lower()
    name = name[: -len(reading.COMPRESSED)] if name.endswith(reading.COMPRESSED) else name
    return os.path.splitext(name)[1]


def is_tagged(path: str) -> bool:
    """Whether `path` is a CoNLL file by its name (`.gz` after the suffix allowed)."""
    return extension(path) in reading.CONLL_SUFFIXES


def file_format(path: str, flag: str) -> str:
    """'conll' or 'jsonl': how this task reads `path`, by its extension."""
    ext = extension(path)
    if ext in reading.CONLL_SUFFIXES + CONLL_TOO:
        return "conll"
    if reading.FORMATS.get(ext) == "jsonl":
        return "jsonl"
    if ext in reading.FORMATS:
        raise UserError(f"{flag}: {path} is not a file of tagged sentences: use {FORMATS_HELP}")
    raise UserError(
        f"{flag}: cannot tell the format of {path} from its extension {ext!r}; tagged sentences are {FORMATS_HELP}"
    )


def holds_tagged_sentences(spec: str, task: str) -> bool:
    """Whether --training-file `spec` is tagged sentences: CoNLL by its name, or JSON Lines whose
    first record has `tokens` and `tags` (or `text` and `spans`). False when it cannot be read:
    reading it later says why. --task auto chooses the reader here, so a file no kind reads by
    its name (`.txt`, CoNLL's often) and a `.tsv` that looks like CoNLL stop here, with every
    format any kind reads and the `--task` (this one's name, `task`) that reads them as tagged
    sentences."""
    if is_tagged(spec.split(",")[0].strip()):
        return True
    try:
        path = next(iter(storage.expand_paths(spec, "--training-file")))
    except (UserError, OSError, StopIteration, ValueError):
        return False
    ext = extension(path)
    if ext in reading.CONLL_SUFFIXES:
        return True
    if ext not in reading.FORMATS:
        raise UserError(unread_extension(path, ext, task))
    conll = _conll_line(path) if ext in CONLL_TOO else None
    if conll:
        raise UserError(
            f"--training-file: {path} looks like CoNLL, not a table: line {conll[0]} "
            f"is a token and its tag ({conll[1]!r}) where a table has its header; "
            f"name it {reading.CONLL_SUFFIXES[0]}, or pass --task {task} to read it "
            f"as CoNLL"
        )
    if reading.FORMATS[ext] != "jsonl":
        return False
    try:
        _, record = next(reading.json_records(reading.lines(path), path))
    except (UserError, OSError, StopIteration, ValueError):
        return False
    return isinstance(record, dict) and ({"tokens", "tags"} <= set(record) or {"text", "spans"} <= set(record))


def unread_extension(path: str, ext: str, task: str) -> str:
    """--task auto's message for a training file no kind reads by its name."""
    tables = ", ".join(sorted(reading.FORMATS))
    conll = ", ".join(reading.CONLL_SUFFIXES)
    known = (
        f"use one of {tables} (a table of texts and labels) or {conll} (tagged sentences, "
        f"CoNLL), each optionally followed by {reading.COMPRESSED}"
    )
    if ext in CONLL_TOO:
        known = (
            f"a {ext} of a token and its tag per line (CoNLL) is read with --task "
            f"{task}, or name it {reading.CONLL_SUFFIXES[0]}; a table of texts and labels "
            f"is one of {tables}"
        )
    return f"--training-file: cannot tell the format of {path} from its extension {ext!r}; {known}"


def _conll_line(path: str):
    """(line number, line) of the first line of a file whose first lines are each a token and an
    IOB2 tag separated by a tab, with no header: CoNLL named as a table. None otherwise, or when
    it cannot be read (the table reader says why)."""
    seen = []
    try:
        for number, line in enumerate(reading.lines(path), start=1):
            fields = line.rstrip("\r\n").split("\t")
            if not line.strip() or fields[0] == "-DOCSTART-":
                continue
            if len(fields) < 2 or iob2.parse(fields[-1].strip()) is None:
                return None
            seen.append((number, line.strip()))
            if len(seen) == _SNIFFED_LINES:
                break
    except (UserError, OSError):
        return None
    return seen[0] if seen else None


def read(spec: str, flag: str, keep_sources: bool = False) -> Tagged:
    """Every sentence of the files of `spec` (comma-separated, globs, gs://); with
    `keep_sources`, each one's CoNLL lines or JSON record too (Tagged.sources)."""
    tagged = Tagged([])
    for path in storage.expand_paths(spec, flag):
        for sentence, source in file_sentences(path, flag):
            tagged.sentences.append(_checked(sentence, tagged))
            if keep_sources:
                tagged.sources.append(source)
    if not tagged.sentences:
        raise UserError(f"{flag}: {spec} holds no sentence")
    return tagged


def file_sentences(path: str, flag: str):
    """(sentence, source) of each sentence of one file: its CoNLL lines (each with its line
    break) or its JSON record."""
    if file_format(path, flag) == "conll":
        for block in conll_blocks(reading.lines(path)):
            yield conll_sentence(block, path), [line for _, line in block]
        return
    for number, record in reading.json_records(reading.lines(path), path):
        yield json_sentence(number, record, path), record


def _checked(sentence: Sentence, tagged: Tagged) -> Sentence:
    """The sentence with IOB2's one repair applied, counted in `tagged`; a tag outside IOB2 stops."""
    for position, tag in enumerate(sentence.tags):
        if iob2.parse(tag) is None:
            raise UserError(
                f"{sentence.at(position)}: tag {tag!r} is not IOB2: use O, B-TYPE "
                f"(an entity's first word) or I-TYPE (its next)"
            )
    broken = iob2.broken(sentence.tags)
    if not broken:
        return sentence
    if not tagged.repaired:
        tagged.first_repair = sentence.at(broken[0])
    tagged.repaired += len(broken)
    return dataclasses.replace(sentence, tags=tuple(iob2.repaired(sentence.tags)))


def word(sentence: Sentence, position: int) -> str:
    """The text of word `position` of `sentence`, for messages."""
    start, end = sentence.words[position]
    return sentence.text[start:end]


def joined(tokens: Sequence[str], tags: Sequence[str], where: str, lines=()) -> Sentence:
    """A sentence of token lists: the tokens joined by single spaces."""
    words, start = [], 0
    for token in tokens:
        words.append((start, start + len(token)))
        start += len(token) + 1
    return Sentence(" ".join(tokens), tuple(words), tuple(tags), where, tuple(lines))


def conll_blocks(lines):
    """[(line number, line)] of each sentence of CoNLL lines: the lines between blank lines and
    `-DOCSTART-` lines, without the lines of byte order marks only."""
    block = []
    for number, line in enumerate(lines, start=1):
        columns = line.replace(_BOM, "").split()
        if not columns and line.strip():
            continue  # only byte order marks: not a sentence break
        if columns[:1] == ["-DOCSTART-"] or not columns:
            if block:
                yield block
            block = []
            continue
        block.append((number, line))
    if block:
        yield block


def conll_sentence(block, path: str) -> Sentence:
    """The sentence of a CoNLL block: the token is the first column, the tag the last."""
    tokens, tags, numbers = [], [], []
    for number, line in block:
        columns = line.replace(_BOM, "").split()
        if len(columns) < 2:
            raise UserError(
                f"{path} line {number}, token {columns[0]!r}: no tag; CoNLL lines "
                f"hold a token and its tag separated by a tab"
            )
        tokens.append(columns[0])
        tags.append(columns[-1])
        numbers.append(number)
    return joined(tokens, tags, f"{path} line {numbers[0]}", numbers)


def json_sentence(number: int, record: dict, path: str) -> Sentence:
    """The sentence of a JSON Lines record with `tokens` and `tags` or with `text` and `spans`."""
    where = f"{path} line {number}"
    if "tokens" in record and "tags" in record:
        return _token_record(record, where)
    if "text" in record and "spans" in record:
        return spans_sentence(record["text"], record["spans"], where)
    raise UserError(
        f'{where}: a tagged sentence needs "tokens" and "tags", or "text" and "spans"; this one has {sorted(record)}'
    )


def _token_record(record: dict, where: str) -> Sentence:
    tokens, tags = record["tokens"], record["tags"]
    if not (_strings(tokens) and _strings(tags)):
        raise UserError(f'{where}: "tokens" and "tags" must be lists of strings')
    if len(tokens) != len(tags):
        raise UserError(f"{where}: {len(tokens)} tokens but {len(tags)} tags")
    if not tokens:
        raise UserError(f'{where}: "tokens" is empty')
    blank = [t for t in tokens if not t.strip() or t != t.strip()]
    if blank:
        raise UserError(f"{where}: token {blank[0]!r} is empty or has spaces around it")
    return joined(tokens, tags, where)


def _strings(values) -> bool:
    return isinstance(values, list) and all(isinstance(v, str) for v in values)


def spans_sentence(text, spans, where: str) -> Sentence:
    """A sentence of a raw text and its labelled character spans: words cut at span edges,
    tagged B- on a span's first word and I- on the rest."""
    if not isinstance(text, str) or not isinstance(spans, list):
        raise UserError(f'{where}: "text" must be a string and "spans" a list')
    spans = sorted(_span(span, text, where) for span in spans)
    for (_, end, label), (start, _, other) in zip(spans, spans[1:]):
        if start < end:
            raise UserError(
                f"{where}: spans {label!r} and {other!r} overlap at characters "
                f"{start}-{end}; one character belongs to one entity"
            )
    edges = sorted({edge for start, end, _ in spans for edge in (start, end)})
    words = []
    for match in _WORDS.finditer(text):
        cuts = [match.start(), *(e for e in edges if match.start() < e < match.end()), match.end()]
        words.extend(zip(cuts, cuts[1:]))
    tags = [iob2.OUTSIDE] * len(words)
    for start, end, label in spans:
        inside = [i for i, (a, b) in enumerate(words) if start <= a and b <= end]
        if not inside:
            raise UserError(f"{where}: span {label!r} at {start}-{end} holds only spaces")
        for n, i in enumerate(inside):
            tags[i] = f"{iob2.BEGIN if n == 0 else iob2.INSIDE}-{label}"
    return Sentence(text, tuple(words), tuple(tags), where)


def _span(span, text: str, where: str) -> tuple[int, int, str]:
    """(start, end, label) of a span, checked against its text."""
    if not isinstance(span, dict) or not {"start", "end", "label"} <= set(span):
        raise UserError(f'{where}: each span needs "start", "end" and "label", got {span!r}')
    start, end, label = span["start"], span["end"], span["label"]
    if not (type(start) is int and type(end) is int and 0 <= start < end <= len(text)):
        raise UserError(
            f"{where}: span {label!r} at {start}-{end} is out of range: the text has "
            f"{len(text)} characters and a span needs 0 <= start < end <= that"
        )
    if not isinstance(label, str) or not label.strip() or label != label.strip():
        raise UserError(f"{where}: span label {label!r} must be a non-empty name without spaces around it")
    prefix, kind = iob2.parse(label) or (iob2.OUTSIDE, "")
    if prefix != iob2.OUTSIDE:  # else B-PER would become a type of its own, tagged B-B-PER
        raise UserError(
            f"{where}: span label {label!r} is an IOB tag; a span's label is its "
            f"entity type ({kind!r}): its words' B- and I- tags are made from it"
        )
    return start, end, label
