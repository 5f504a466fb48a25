"""IOB2 tags: reading them, repairing the one break that has a single meaning, and the entities they mark.

IOB2 (Tjong Kim Sang and Veenstra 1999; the scheme of CoNLL-2003's releases since, WikiANN and
WNUT-17): `B-X` begins an entity of type X, `I-X` continues one, `O` is outside. Entities are
read by seqeval's strict rules (`mode="strict", scheme=IOB2`, the rules behind the published
F1 figures of Hugging Face's run_ner): an entity is a `B-X` and the `I-X` right after it; an
`I-X` that continues nothing, or that follows an entity of another type, marks no entity.
A file's such `I-X` is read as a `B-X` (`repaired`), and so are an export's predicted ones
(spans.py reads the repaired tags by these rules: the entity a user gets starts there, issue
#64); the entity scores read the model's predicted tags by the strict rules as they are.

seqeval itself is not a dependency: its one release (1.2.2, 2020) is a source archive whose
setup.py fails under pip's legacy build path (tf-stack.md), and these rules are a few lines;
tests/tasks/tagging/test_tagging_metrics.py holds seqeval's own results on fixed examples.
"""

from collections.abc import Sequence

OUTSIDE = "O"
BEGIN, INSIDE = "B", "I"
# The tag id of a token that carries no word's tag (a word's later pieces, special tokens,
# padding, words cut by --max-seq-length): the loss and the scores skip it.
UNTAGGED = -1


def parse(tag: str) -> tuple[str, str] | None:
    """(prefix, type) of an IOB2 tag, ("O", "") for O, None for anything else (a bare `PER`,
    BIOES's `S-PER`, `B_PER`)."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, dash, kind = tag.partition("-")
    return (prefix, kind) if dash and prefix in (BEGIN, INSIDE) and kind.strip() == kind != "" else None


def broken(tags: Sequence[str]) -> list[int]:
    """Positions of the `I-X` that continue nothing of type X: IOB1's way of starting an entity
    (or an annotator's slip), read as the start of one by `repaired`."""
    found, previous = [], ""
    for position, tag in enumerate(tags):
        prefix, kind = parse(tag)
        if prefix == INSIDE and previous != kind:
            found.append(position)
        previous = kind
    return found


def repaired(tags: Sequence[str]) -> list[str]:
    """The tags with every `broken` `I-X` turned into `B-X`: the IOB1 to IOB2 conversion, the
    one repair whose entity is not in doubt."""
    tags = list(tags)
    for position in broken(tags):
        tags[position] = f"{BEGIN}-{tags[position][2:]}"
    return tags


def entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """(type, first word, end word exclusive) of each entity of valid IOB2 `tags`, by the strict
    rules: a `B-X` and the `I-X` right after it."""
    found, current = [], None
    for position, tag in enumerate([*tags, OUTSIDE]):
        prefix, kind = parse(tag) or (OUTSIDE, "")
        if current and not (prefix == INSIDE and kind == current[0]):
            found.append((current[0], current[1], position))
            current = None
        if prefix == BEGIN:
            current = (kind, position)
    return found


def tag_names(types: Sequence[str]) -> list[str]:
    """The tags a model predicts for entity `types`, in the order of its outputs: O, then B-
    and I- of each type."""
    return [OUTSIDE, *(f"{prefix}-{kind}" for kind in types for prefix in (BEGIN, INSIDE))]
