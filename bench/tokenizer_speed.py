"""Benchmark: the preprocessor's tokenizer against TF-Text's BertTokenizer, on real tweets.

    python bench/tokenizer_speed.py                          # TweetEval's tweets
    python bench/tokenizer_speed.py --rows 200000 --batch-size 4096

In one process, over the same texts batched as the token cache batches them (tf.data, parallel
map over batches), it times three ways of tokenizing with the default encoder's vocabulary:
TF-Text's BertTokenizer with a vocabulary lookup table (the preprocessor's tokenizer before,
the baseline), TF-Text's FastBertTokenizer alone, and the package's BertPreprocessor packed
as the token cache packs it (`input_pipeline.pack_tokens`). It prints rows/s and the ratio to the
baseline, the median of --rounds rounds after one untimed round, and how many texts get ids
other than the baseline's (BertPreprocessor.tokenize against BertTokenizer, per word).
The texts are TweetEval's (../shared/data/tweeteval) or --texts (one per line), the sample
posts when neither is there, repeated up to --rows.
"""

import argparse
import collections
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]
from common import add_publish_flag, finish, printed, publish, timed  # noqa: E402

TWEETEVAL = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "tweeteval"))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=400_000, help="texts per round")
    parser.add_argument(
        "--batch-size", type=int, default=1024, help="texts per tokenizer call (the token cache's: 1024)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", help="a UTF-8 file of texts, one per line (default: TweetEval's)")
    parser.add_argument("--json", help="also write the results here")
    add_publish_flag(parser)
    return parser.parse_args(argv)


def load_texts(rows: int, path=None) -> list:
    files = [path] if path else sorted(glob.glob(os.path.join(TWEETEVAL, "*_text.txt")))
    texts = []
    for path in files:
        with open(path, encoding="utf-8", newline="") as f:
            texts += [line for line in f.read().split("\n") if line]
    if not texts:
        from trainer import reading
        from trainer.data import splits

        texts = [str(t) for t in reading.read_table(splits.SAMPLE_FILES["train"], "--texts")["bodyText"]]
    return (texts * (rows // len(texts) + 1))[:rows]


def tokenizers(vocab_file: str):
    """{name: function of a batch of strings}: the baseline first."""
    import tensorflow as tf
    import tensorflow_text as text

    from trainer.data.input_pipeline import pack_tokens
    from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor, check_vocab

    vocab = check_vocab(vocab_file)
    table = tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(
            vocab_file, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER
        ),
        default_value=vocab.index("[UNK]"),
    )
    baseline = text.BertTokenizer(table, token_out_type=tf.int32, lower_case=True)
    fast = text.FastBertTokenizer(vocab=vocab, token_out_type=tf.int32, lower_case_nfd_strip_accents=True)
    preprocessor = WordPiecePreprocessor(vocab_file, lower_case=True)
    return (
        {
            "BertTokenizer (baseline)": lambda batch: baseline.tokenize(batch).flat_values,
            "FastBertTokenizer": lambda batch: fast.tokenize(batch).flat_values,
            "BertPreprocessor, packed as the cache packs": lambda batch: pack_tokens(preprocessor, batch),
        },
        baseline,
        preprocessor,
    )


def rows_per_second(function, texts, batch_size: int, rounds: int) -> float:
    import tensorflow as tf

    dataset = (
        tf.data.Dataset.from_tensor_slices(texts)
        .batch(batch_size)
        .map(function, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    return len(texts) / timed(lambda: collections.deque(dataset, maxlen=0), rounds)


def differing_texts(baseline, preprocessor, texts) -> int:
    """Texts whose ids per word differ between the baseline and the preprocessor."""
    import tensorflow as tf

    differing = 0
    for start in range(0, len(texts), 4096):
        batch = tf.constant(texts[start : start + 4096])
        expected, got = baseline.tokenize(batch), preprocessor.tokenize(batch)
        differing += sum(a != b for a, b in zip(_per_text(expected), _per_text(got)))
    return differing


def _per_text(tokens) -> list:
    """[B, (words), (pieces)] -> per text, its word lengths and its ids (to_list is too slow)."""
    texts, words, ids = (x.numpy() for x in (tokens.row_splits, tokens.values.row_splits, tokens.flat_values))
    return [
        (
            tuple(words[texts[i] : texts[i + 1] + 1] - words[texts[i]]),
            ids[words[texts[i]] : words[texts[i + 1]]].tobytes(),
        )
        for i in range(len(texts) - 1)
    ]


def main(argv=None) -> dict:
    args = parse_args(argv)
    import numpy as np

    import trainer
    from trainer.modeling.encoders import registry

    trainer.import_tensorflow()

    texts = np.array(load_texts(args.rows, args.texts), dtype=object).astype(str)
    functions, baseline, preprocessor = tokenizers(os.path.join(registry.packaged_default_dir(), "vocab.txt"))
    rates = {name: rows_per_second(f, texts, args.batch_size, args.rounds) for name, f in functions.items()}
    unique = sorted(set(texts.tolist()))
    results = {
        "rows": len(texts),
        "batch_size": args.batch_size,
        "rows_per_second": rates,
        "distinct_texts": len(unique),
        "differing_texts": differing_texts(baseline, preprocessor, unique),
    }
    with printed() as text:
        report(results, args.rounds)
    if args.publish:
        publish("tokenizer_speed", {**results, "texts": args.texts or "TweetEval"}, text.getvalue())
    return finish(results, args.json)


def report(results: dict, rounds: int) -> None:
    rates = results["rows_per_second"]
    base, width = next(iter(rates.values())), max(map(len, rates))
    print(f"{results['rows']:,} texts in batches of {results['batch_size']}, median of {rounds} rounds")
    for name, rate in rates.items():
        print(f"{name.ljust(width)}  {rate:12,.0f} rows/s  {rate / base:6.2f}x")
    print(
        f"ids per word differ from the baseline's on {results['differing_texts']} of "
        f"{results['distinct_texts']:,} distinct texts"
    )


if __name__ == "__main__":
    main()
