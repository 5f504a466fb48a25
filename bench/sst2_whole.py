"""SST-2 without leaks (issue #65): held-out whole sentences, and no training row that is part of one.

GLUE's SST-2 training set is every phrase of its sentences' parse trees, so a random split of it is
not held out: most validation rows are phrases of longer training rows, and a transfer set drawn
from the rest holds the teacher's answers for the very phrases the student is scored on. GLUE's
official dev set is whole sentences that share no tree with training. This protocol rebuilds that
from the training rows alone (../shared/data/sst2: train.tsv and dev.tsv are both splits of GLUE's
training set; the official dev set is kept elsewhere):

1. every row, as the trainer's containment check reads it (trainer.data.leakage.words: lower-case
   whole words, punctuation ignored), deduplicated;
2. whole sentences: rows that lie inside no other row (the roots of the parse trees);
3. a seeded --held-out of them for validation and as many again for test;
4. every other row that lies inside a held-out sentence (a phrase of its tree, or the sentence
   again) removed, and every row that holds one (none can: held-out sentences are whole; counted
   as a check);
5. the rest, in file order: the pool that labelled rows and the transfer set are drawn from.

    python bench/sst2_whole.py [--held-out 1000] [--seed 0] [--publish]

prints the counts, and what the trainer's containment check (trainer.data.leakage.find_contained,
the warning of every run) says of this protocol's validation sentences against the pool, and of a
random split of the same rows (a seeded 1,000 of them against the rest), as the first distillation
bench drew its splits.
"""

import argparse
import dataclasses
import os
import sys

import numpy as np
from common import add_publish_flag, machine, printed, publish, read_sst2_tsv, table

HERE = os.path.dirname(os.path.abspath(__file__))
SST2 = os.path.join(HERE, "..", "..", "shared", "data", "sst2")
sys.path.insert(0, os.path.join(HERE, ".."))
from trainer.data.leakage import find_contained, words  # noqa: E402

Row = tuple[str, str]  # (sentence, label), as SST-2's TSV holds it


@dataclasses.dataclass
class WholeSplit:
    validation: list[Row]
    test: list[Row]
    pool: list[Row]  # training and transfer rows: none inside a held-out sentence
    counts: dict


def phrases(w: tuple):
    """Every contiguous run of `w`'s words, `w` included."""
    return (w[i:j] for i in range(len(w)) for j in range(i + 1, len(w) + 1))


def whole_sentence_split(rows: list[Row], held_out: int, seed: int) -> WholeSplit:
    """The protocol above over `rows` (all of GLUE's training rows)."""
    first = {}
    for row in rows:
        first.setdefault(words(row[0]), row)
    distinct = set(first)
    inside = {p for w in distinct for p in phrases(w) if p != w and p in distinct}
    whole = sorted(w for w in distinct if w not in inside and w)
    chosen = np.random.default_rng(seed).choice(len(whole), 2 * held_out, replace=False)
    sentences = [whole[i] for i in chosen]
    validation, test = sentences[:held_out], sentences[held_out:]
    parts = {p for w in sentences for p in phrases(w)}
    kept, seen = [], set()
    for row in rows:
        w = words(row[0])
        if w and w not in parts and w not in seen:
            seen.add(w)
            kept.append(row)
    holding = find_contained([first[w][0] for w in sentences], [r[0] for r in kept]).count
    counts = {
        "rows": len(rows),
        "distinct": len(distinct),
        "whole_sentences": len(whole),
        "validation": held_out,
        "test": held_out,
        "removed_inside_held_out": len(parts & distinct) - 2 * held_out,
        "pool_holding_a_held_out_sentence": holding,
        "pool": len(kept),
        "held_out_mean_words": float(np.mean([len(w) for w in sentences])),
        "pool_mean_words": float(np.mean([len(words(r[0])) for r in kept])),
    }
    return WholeSplit([first[w] for w in validation], [first[w] for w in test], kept, counts)


def load(held_out: int = 1000, seed: int = 0) -> WholeSplit:
    """The split of ../shared/data/sst2's rows (train.tsv, then dev.tsv)."""
    rows = read_sst2_tsv(os.path.join(SST2, "train.tsv")) + read_sst2_tsv(os.path.join(SST2, "dev.tsv"))
    return whole_sentence_split([(sentence, label) for sentence, label in rows], held_out, seed)


def describe(split: WholeSplit) -> str:
    c = split.counts
    return (
        f"SST-2 whole sentences (bench/sst2_whole.py): {c['rows']:,} rows of GLUE train, "
        f"{c['distinct']:,} distinct, {c['whole_sentences']:,} whole sentences; held out "
        f"{c['validation']:,} validation and {c['test']:,} test sentences "
        f"({c['held_out_mean_words']:.1f} words on average); removed {c['removed_inside_held_out']:,} "
        f"rows lying inside them; pool {c['pool']:,} rows ({c['pool_mean_words']:.1f} words), "
        f"{c['pool_holding_a_held_out_sentence']} holding a held-out sentence"
    )


def containment(split: WholeSplit, held_out: int, seed: int) -> dict:
    """The containment check's count ({split: (contained, checked)}) of this protocol's validation
    sentences in the pool, and of a random split of the same rows."""
    rows = read_sst2_tsv(os.path.join(SST2, "train.tsv")) + read_sst2_tsv(os.path.join(SST2, "dev.tsv"))
    order = np.random.default_rng(seed).permutation(len(rows))
    random_held = [rows[i][0] for i in order[:held_out]]
    random_rest = [rows[i][0] for i in order[held_out:]]
    found = {
        "whole sentences against the pool": find_contained(
            [s for s, _ in split.validation], [s for s, _ in split.pool]
        ),
        "a random split against the rest": find_contained(random_held, random_rest),
    }
    return {name: (f.count, f.checked) for name, f in found.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", type=int, default=1000, help="sentences for validation, and again for test")
    parser.add_argument("--seed", type=int, default=0)
    add_publish_flag(parser)
    args = parser.parse_args()
    split = load(args.held_out, args.seed)
    checked = containment(split, args.held_out, args.seed)
    with printed() as text:
        print(describe(split) + "\n")
        print(
            table(
                [
                    [key, f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"]
                    for key, value in split.counts.items()
                ],
                ["count", "value"],
            )
        )
        print("\nthe trainer's containment check (5+ whole words inside a training text):")
        print(
            table(
                [[name, f"{count:,} of {of:,}"] for name, (count, of) in checked.items()],
                ["validation", "inside training rows"],
            )
        )
    if args.publish:
        publish(
            "sst2_whole",
            {
                "machine": machine(),
                "args": vars(args),
                "counts": split.counts,
                "containment": {k: list(v) for k, v in checked.items()},
            },
            text.getvalue(),
        )


if __name__ == "__main__":
    main()
