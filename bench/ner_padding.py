"""How much of bench/ner.py's training speed-up over transformers is padding: the tokens one
training epoch of each tagging file runs through the encoder, counted, not timed.

    python bench/ner_padding.py [--data wikiann,wnut17] [--publish]

- exact: each sentence's pieces with [CLS] and [SEP], cut at 128 (the default encoder's
  tokenizer, as bench/ner_reference.py tokenizes the words);
- ladder: each sentence padded to the trainer's next length (input_pipeline.padded_lengths(128):
  the trainer batches sentences of one padded length together);
- random batches: the reference's, shuffled with seed 42, 32 per batch, padded to the batch's
  longest row (DataCollatorForTokenClassification's dynamic padding).

Where the two sides spend the same time per token, random batches / ladder is the speed-up to
expect, and random batches / exact the most any padding could give.
"""

import argparse
import os
import random

from common import add_publish_flag, fmt, machine, printed, publish, table
from ner import DATA, FILES, encoder_dir
from ner_reference import batches, encode

MAX_LENGTH, BATCH, SEED = 128, 32, 42


def reference_rows(path: str) -> list:
    """The training sentences as bench/ner_reference.py encodes them: (piece ids with [CLS] and
    [SEP], cut at MAX_LENGTH; labels; first pieces)."""
    from transformers import AutoTokenizer

    from trainer.tasks.tagging import files

    sentences = files.read(path, "--training-file").sentences
    tokenizer = AutoTokenizer.from_pretrained(encoder_dir("default"))
    return encode(tokenizer, sentences, {}, MAX_LENGTH)


def random_batches(rows: list) -> int:
    """Tokens of one epoch of bench/ner_reference.py's batches (its own batching), shuffled with
    SEED as its first epoch is."""
    order = list(range(len(rows)))
    random.Random(SEED).shuffle(order)
    return sum(ids.numel() for _, ids, _, _ in batches(rows, BATCH, 0, order))


def tokens(path: str) -> dict:
    from trainer.data import input_pipeline

    rows = reference_rows(path)
    counts = [len(ids) for ids, _, _ in rows]
    ladder = input_pipeline.padded_lengths(MAX_LENGTH)
    return {
        "sentences": len(counts),
        "exact": sum(counts),
        "ladder": int(input_pipeline.padded_to(counts, ladder).sum()),
        "random_batches": random_batches(rows),
        "ladder_lengths": list(ladder),
    }


def report(results: dict) -> str:
    rows = []
    for data, t in results.items():
        exact = t["exact"]
        rows.append(
            [
                data,
                f"{t['sentences']}",
                fmt(exact / t["sentences"], ".1f"),
                f"{exact}",
                f"{t['ladder'] / exact:.2f}x",
                f"{t['random_batches'] / exact:.2f}x",
                f"{t['random_batches'] / t['ladder']:.2f}x",
            ]
        )
    text = table(rows, ["data", "sentences", "pieces", "exact tokens", "ladder", "random batches", "random / ladder"])
    print(text)
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=",".join(FILES), help="comma-separated: " + ", ".join(FILES))
    add_publish_flag(parser)
    args = parser.parse_args()
    with printed():
        results = {data: tokens(os.path.join(DATA, FILES[data][0])) for data in args.data.split(",")}
        text = report(results)
    if args.publish:
        publish("ner_padding", {"machine": machine(), "args": vars(args), "results": results}, text)


if __name__ == "__main__":
    main()
