"""`trainer.prepare` of tagged sentences: each sentence read as the trainer reads it (its tags
checked, its IOB1 starts repaired for the strata), and written back as it came, its CoNLL lines
(all their columns) or its JSON record, to files of the input's own extension.

Tagged sentences are small beside the tables (splits.py), so they are held whole.
`-DOCSTART-` lines are not written: a split's sentences come from any document.
"""

import json

from trainer import storage
from trainer.errors import UserError
from trainer.tasks.tagging import files
from trainer.tasks.tagging import splits as tagged_splits


def read(args):
    """(label spec, tag ids [N, W], each sentence's text hash, the input's extension, the text
    of a file of sentences `index`) of --input's tagged sentences, for prepare.Labelled:
    identical sentences share a hash, and stay in one split."""
    tagged = files.read(args.input, "--input", keep_sources=True)
    conll = {isinstance(source, list) for source in tagged.sources}
    if len(conll) > 1:
        raise UserError(
            f"--input: {args.input} mixes CoNLL and JSON Lines files; the splits are "
            f"written in one format, so prepare each format on its own"
        )
    spec = tagged_splits.tag_spec(tagged, args.input, "--input")
    split = tagged_splits.tagged_split(tagged, args.input, spec)
    first = next(iter(storage.expand_paths(args.input, "--input")))
    write = _conll if conll == {True} else _json_line
    return (
        spec,
        split.labels,
        split.hashes,
        files.extension(first),
        lambda index: "".join(write(tagged.sources[i]) for i in index),
    )


def _conll(lines) -> str:
    """A sentence's CoNLL lines, then the blank line that ends it."""
    return "".join(line.rstrip("\r\n") + "\n" for line in lines) + "\n"


def _json_line(record) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"
