"""Files of tagged sentences for token classification, read into raw strings with character
offsets: CoNLL, and JSON Lines of token lists or of character spans.

- **CoNLL** (`.conll`, `.iob`, optionally `.gz`): a token and its tag per line, the tag in the
  last of its tab- or space-separated columns (CoNLL-2003's four columns read as WikiANN's two),
  a blank line between sentences, `-DOCSTART-` lines skipped. U+FEFF, a byte order mark left
  inside a file by joining files (WNUT-17's dev set holds two, one as a whole line), is dropped.
- **JSON Lines with `tokens` and `tags`**: one sentence per line, the two lists word for word.
- **JSON Lines with `text` and `spans`** (`start`, `end`, `label`: what labelling tools such as
  Label Studio and doccano export): the text as given; its words are its runs of non-space
  characters, cut where a span starts or ends, so every span is whole words.

Token lists become one string, the tokens joined by single spaces, so every sentence is a raw
string and the offsets of its words and entities index it, as they will index a user's text at
prediction. Tags are IOB2 (tasks.tagging.tags): anything else stops reading naming the file,
line and token; an `I-X` that continues nothing is read as `B-X` (IOB1's way of starting an
entity), and the reader returns how many it repaired and where the first was, for the log.
"""
import dataclasses
import re
from typing import List, Sequence, Tuple

from trainer import reading, storage
from trainer.errors import UserError
from trainer.tasks.tagging import tags as iob2

CONLL_SUFFIXES = (".conll", ".iob")
_WORDS = re.compile(r"\S+")
_BOM = "\ufeff"


@dataclasses.dataclass(frozen=True)
class Sentence:
    text: str
    words: Tuple[Tuple[int, int], ...]  # (start, end) character offsets into `text`
    tags: Tuple[str, ...]  # one IOB2 tag per word
    where: str  # "FILE line N": where it starts, for messages


@dataclasses.dataclass
class Tagged:
    sentences: List[Sentence]
    repaired: int = 0  # I-X tags read as B-X
    first_repair: str = ""  # "FILE line N, token 'T'" of the first

    def types(self) -> List[str]:
        """The entity types the sentences' tags name, sorted."""
        return sorted({tag[2:] for s in self.sentences for tag in s.tags if tag != iob2.OUTSIDE})


def is_tagged(path: str) -> bool:
    """Whether `path` is a CoNLL file by its name (`.gz` after the suffix allowed)."""
    name = path.lower()
    name = name[:-len(reading.COMPRESSED)] if name.endswith(reading.COMPRESSED) else name
    return name.endswith(CONLL_SUFFIXES)


def holds_tagged_sentences(spec: str) -> bool:
    """Whether --training-file `spec` is tagged sentences: CoNLL by its name, or JSON Lines whose
    first record has `tokens` and `tags` (or `text` and `spans`). False when it cannot be read:
    reading it later says why."""
    if is_tagged(spec.split(",")[0].strip()):
        return True
    try:
        path = next(iter(storage.expand_paths(spec, "--training-file")))
        if is_tagged(path):
            return True
        if reading.file_format(path, "--training-file", compressed=True) != "jsonl":
            return False
        _, record = next(reading.json_records(reading.lines(path), path))
    except (UserError, OSError, StopIteration, ValueError):
        return False
    return isinstance(record, dict) and ({"tokens", "tags"} <= set(record)
                                         or {"text", "spans"} <= set(record))


def read(spec: str, flag: str) -> Tagged:
    """Every sentence of the files of `spec` (comma-separated, globs, gs://)."""
    tagged = Tagged([])
    for path in storage.expand_paths(spec, flag):
        if is_tagged(path):
            records = conll_sentences(reading.lines(path), path)
        elif reading.file_format(path, flag, compressed=True) == "jsonl":
            records = json_sentences(reading.json_records(reading.lines(path), path), path)
        else:
            raise UserError(f"{flag}: {path} is not a file of tagged sentences: use CoNLL "
                            f"(.conll, .iob) or JSON Lines with tokens and tags, or text and spans")
        for sentence in records:
            tagged.sentences.append(_checked(sentence, tagged))
    if not tagged.sentences:
        raise UserError(f"{flag}: {spec} holds no sentence")
    return tagged


def _checked(sentence: Sentence, tagged: Tagged) -> Sentence:
    """The sentence with IOB2's one repair applied, counted in `tagged`; a tag outside IOB2 stops."""
    for position, tag in enumerate(sentence.tags):
        if iob2.parse(tag) is None:
            raise UserError(f"{sentence.where}: tag {tag!r} of token {word(sentence, position)!r} is "
                            f"not IOB2: use O, B-TYPE (an entity's first word) or I-TYPE (its next)")
    broken = iob2.broken(sentence.tags)
    if not broken:
        return sentence
    if not tagged.repaired:
        tagged.first_repair = f"{sentence.where}, token {word(sentence, broken[0])!r}"
    tagged.repaired += len(broken)
    return dataclasses.replace(sentence, tags=tuple(iob2.repaired(sentence.tags)))


def word(sentence: Sentence, position: int) -> str:
    """The text of word `position` of `sentence`, for messages."""
    start, end = sentence.words[position]
    return sentence.text[start:end]


def joined(tokens: Sequence[str], tags: Sequence[str], where: str) -> Sentence:
    """A sentence of token lists: the tokens joined by single spaces."""
    words, start = [], 0
    for token in tokens:
        words.append((start, start + len(token)))
        start += len(token) + 1
    return Sentence(" ".join(tokens), tuple(words), tuple(tags), where)


def conll_sentences(lines, path: str):
    """Sentences of CoNLL lines: the token is the first column, the tag the last."""
    tokens, tags, first = [], [], 0
    for number, line in enumerate(lines, start=1):
        columns = line.replace(_BOM, "").split()
        if not columns and line.strip():
            continue  # only byte order marks: not a sentence break
        if columns[:1] == ["-DOCSTART-"] or not columns:
            if tokens:
                yield joined(tokens, tags, f"{path} line {first}")
            tokens, tags = [], []
            continue
        if len(columns) < 2:
            raise UserError(f"{path}: line {number}: token {columns[0]!r} has no tag; CoNLL lines "
                            f"hold a token and its tag separated by a tab")
        first = first if tokens else number
        tokens.append(columns[0])
        tags.append(columns[-1])
    if tokens:
        yield joined(tokens, tags, f"{path} line {first}")


def json_sentences(records, path: str):
    """Sentences of JSON Lines records, each with `tokens` and `tags` or with `text` and `spans`."""
    for number, record in records:
        where = f"{path} line {number}"
        if "tokens" in record and "tags" in record:
            yield _token_record(record, where)
        elif "text" in record and "spans" in record:
            yield spans_sentence(record["text"], record["spans"], where)
        else:
            raise UserError(f"{where}: a tagged sentence needs \"tokens\" and \"tags\", or "
                            f"\"text\" and \"spans\"; this one has {sorted(record)}")


def _token_record(record: dict, where: str) -> Sentence:
    tokens, tags = record["tokens"], record["tags"]
    if not (_strings(tokens) and _strings(tags)):
        raise UserError(f"{where}: \"tokens\" and \"tags\" must be lists of strings")
    if len(tokens) != len(tags):
        raise UserError(f"{where}: {len(tokens)} tokens but {len(tags)} tags")
    if not tokens:
        raise UserError(f"{where}: \"tokens\" is empty")
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
        raise UserError(f"{where}: \"text\" must be a string and \"spans\" a list")
    spans = sorted(_span(span, text, where) for span in spans)
    for (_, end, label), (start, _, other) in zip(spans, spans[1:]):
        if start < end:
            raise UserError(f"{where}: spans {label!r} and {other!r} overlap at characters "
                            f"{start}-{end}; one character belongs to one entity")
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


def _span(span, text: str, where: str) -> Tuple[int, int, str]:
    """(start, end, label) of a span, checked against its text."""
    if not isinstance(span, dict) or not {"start", "end", "label"} <= set(span):
        raise UserError(f"{where}: each span needs \"start\", \"end\" and \"label\", got {span!r}")
    start, end, label = span["start"], span["end"], span["label"]
    if not (type(start) is int and type(end) is int and 0 <= start < end <= len(text)):
        raise UserError(f"{where}: span {label!r} at {start}-{end} is out of range: the text has "
                        f"{len(text)} characters and a span needs 0 <= start < end <= that")
    if not isinstance(label, str) or not label.strip() or label != label.strip():
        raise UserError(f"{where}: span label {label!r} must be a non-empty name without spaces around it")
    return start, end, label
