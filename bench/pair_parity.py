"""Benchmark: every family's preprocessor packs real sentence pairs as Hugging Face does.

    python bench/pair_parity.py --publish

bench/tokenizer_parity.py compares the tokenizers alone on single texts; this compares what the
model is fed: special tokens, the family's pair layout, `longest_first` truncation and padding.
For each family with a fixture in tests/reference_<family>.py (a small vocabulary of its
tokenizer kind: the published checkpoints' files cannot be downloaded here), the package's
preprocessor and transformers' fast tokenizer, built from the same files, encode all 1,500
MRPC dev pairs of ../shared/data at --max-seq-length 128 (few cut) and 32 (most cut), and the
rows whose input ids, mask or type ids differ are counted.
"""

import argparse
import csv
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "helpers")]
from common import finish, printed, publish, table  # noqa: E402

MRPC_DEV = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "glue", "mrpc_dev.csv"))
LENGTHS = (128, 32)


def pairs(path=MRPC_DEV):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return [row["sentence1"] for row in rows], [row["sentence2"] for row in rows]


def compare(family: str, first: list, second: list, work: str) -> list:
    """[(length, rows equal, rows, cut rows)] of one family."""
    import hf_reference
    import numpy as np
    import tensorflow as tf

    from trainer.data import input_pipeline
    from trainer.modeling.encoders import checkpoints

    directory = hf_reference.write_checkpoint(family, os.path.join(work, family))
    checkpoint = checkpoints.read_checkpoint(directory)
    reference = hf_reference.fast_tokenizer(directory)
    results = []
    for length in LENGTHS:
        theirs = reference(first, second, padding="max_length", truncation=True, max_length=length)
        ours = input_pipeline.encode(checkpoint.preprocessor(length), tf.constant(first), tf.constant(second))
        equal = np.all(ours["input_word_ids"].numpy() == np.array(theirs["input_ids"]), axis=1)
        equal &= np.all(ours["input_mask"].numpy() == np.array(theirs["attention_mask"]), axis=1)
        if "token_type_ids" in theirs:
            equal &= np.all(ours["input_type_ids"].numpy() == np.array(theirs["token_type_ids"]), axis=1)
        cut = int(np.sum(np.array(theirs["attention_mask"]).sum(axis=1) == length))
        results.append((length, int(equal.sum()), len(first), cut))
    return results


def main(argv=None) -> dict:
    import hf_reference

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--publish", action="store_true", help="also write the result to bench/results/")
    args = parser.parse_args(argv)
    first, second = pairs()
    rows, result = [], {}
    with tempfile.TemporaryDirectory() as work:
        for family in hf_reference.families():
            result[family] = [
                dict(zip(("length", "equal", "pairs", "cut"), r)) for r in compare(family, first, second, work)
            ]
            rows += [
                [
                    family,
                    str(r["length"]),
                    f"{r['cut']:,}",
                    f"{r['equal']:,} / {r['pairs']:,}",
                    f"{100 * r['equal'] / r['pairs']:.2f}%",
                ]
                for r in result[family]
            ]
    with printed() as text:
        print("MRPC dev pairs packed by the package's preprocessor vs transformers' fast tokenizer")
        print(table(rows, ["family", "max length", "pairs cut", "equal rows", "equal"]))
    output = finish({"data": "glue/mrpc_dev.csv", "lengths": list(LENGTHS), "families": result})
    if args.publish:
        publish("pair_parity", output, text.getvalue())
    return output


if __name__ == "__main__":
    main()
