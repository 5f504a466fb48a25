"""Benchmark: each native family at its published config computes transformers' forward.

    python bench/encoder_parity.py --publish
    python bench/encoder_parity.py --models roberta-base,mpnet-base

For each published model (bench/published_encoders.py: random weights at its published config,
written by transformers with PyTorch) the package's encoder is loaded with
`load_encoder(dir, seq_length=128)` and fed the same ids as transformers' PyTorch model, in
float32: a padded batch (rows of 128, 97, 40 and 5 tokens, random ids from the vocabulary
between the family's [CLS] and [SEP]) and a batch of sentence pairs (the family's separators,
and token_type_ids where its tokenizer gives them). It reports the largest absolute
difference of sequence_output over real tokens (and of pooled_output where transformers has a
pooler), the load seconds, and whether both are within 1e-4. tests/modeling/encoders/test_encoder_families.py
checks the same at tiny configs in the default suite.
"""

import argparse
import gc
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_reference  # noqa: E402
import published_encoders  # noqa: E402  (also puts tests/ on the path, for hf_reference)
from common import WORK, finish, machine, printed, publish, table  # noqa: E402

TOLERANCE = 1e-4
LENGTHS = (128, 97, 40, 5)
PAIRS = ((60, 60), (30, 20), (3, 4))  # real tokens of each pair's texts


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--models",
        default=",".join(published_encoders.PUBLISHED),
        help="which of: " + ", ".join(published_encoders.PUBLISHED),
    )
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--publish", action="store_true", help="also write them to bench/results/")
    return parser.parse_args(argv)


def _random_ids(published, vocab_size: int, count: int, rng) -> np.ndarray:
    return rng.choice(np.setdiff1d(np.arange(vocab_size), published.specials), count)


def _rows(published, segments, seq_length: int) -> dict:
    """The features of rows made of `segments` (per row, a list of id arrays): [CLS] a [SEP]
    (then the family's separators and b [SEP]), padded with its pad id to seq_length."""
    p = published
    ids, types, mask = [], [], []
    for parts in segments:
        row, row_types = [p.cls], [0]
        for index, part in enumerate(parts):
            seps = 1 if index == len(parts) - 1 else p.pair_seps
            row += [*part, *[p.sep] * seps]
            row_types += [index] * (len(part) + seps)
        padding = seq_length - len(row)
        ids.append(row + [p.pad] * padding)
        types.append(row_types + [0] * padding)
        mask.append([1] * len(row) + [0] * padding)
    mask = np.array(mask, np.int32)
    return {
        "input_word_ids": np.array(ids, np.int32),
        "input_mask": mask,
        "input_type_ids": np.array(types, np.int32) if p.types else np.zeros_like(mask),
    }


def batches(published, vocab_size: int, seq_length: int, seed: int = 0) -> dict:
    """{"padded": features, "pairs": features}; lengths beyond seq_length are cut to it."""
    rng = np.random.default_rng(seed)
    p = published
    padded = [[_random_ids(p, vocab_size, min(n, seq_length) - 2, rng)] for n in LENGTHS]
    room = seq_length - 1 - p.pair_seps - 1
    pairs = [
        [_random_ids(p, vocab_size, min(a, room // 2), rng), _random_ids(p, vocab_size, min(b, room // 2), rng)]
        for a, b in PAIRS
    ]
    return {"padded": _rows(p, padded, seq_length), "pairs": _rows(p, pairs, seq_length)}


def differences(encoder, directory: str, features: dict, types: bool) -> dict:
    """{output: max abs difference} of our network and transformers' on `features`."""
    mask = features["input_mask"]
    reference = hf_reference.hidden_states(
        directory,
        features["input_word_ids"].tolist(),
        mask.tolist(),
        features["input_type_ids"].tolist() if types else None,
    )
    ours = encoder.network(features)
    result = {
        "sequence_output": hf_reference.max_difference(ours["sequence_output"], reference["sequence_output"], mask)
    }
    if "pooled_output" in reference:
        result["pooled_output"] = float(np.max(np.abs(np.asarray(ours["pooled_output"]) - reference["pooled_output"])))
    return result


def check(name: str, directory: str, seq_length: int, cache_dir: str) -> dict:
    """One published model: load seconds, each batch's differences, and whether all are within
    TOLERANCE. Everything it built is released before it returns (xlm-roberta-base and
    roberta-large hold gigabytes in both frameworks)."""
    import tensorflow as tf

    from trainer.modeling.encoders import load_encoder

    published = published_encoders.PUBLISHED[name]
    start = time.perf_counter()
    encoder = load_encoder(directory, seq_length=seq_length, cache_dir=cache_dir)
    load_seconds = time.perf_counter() - start
    # The network's config, not config.json's keys: families name them differently (DistilBERT's
    # n_layers and dim).
    config = encoder.network.encoder_config
    result = {
        "family": published.family,
        "layers": config.num_layers,
        "hidden": config.hidden_size,
        "load_seconds": load_seconds,
        "batches": {
            batch: differences(encoder, directory, features, published.types)
            for batch, features in batches(published, config.vocab_size, seq_length).items()
        },
    }
    result["max_difference"] = max(d for b in result["batches"].values() for d in b.values())
    result["passed"] = result["max_difference"] <= TOLERANCE
    del encoder
    tf.keras.backend.clear_session()
    gc.collect()
    return result


def report(results: dict) -> None:
    def cell(batch, output):
        value = batch.get(output)
        return "-" if value is None else f"{value:.1e}"

    rows = [
        [
            name,
            r["family"],
            str(r["layers"]),
            str(r["hidden"]),
            f"{r['load_seconds']:.1f}",
            cell(r["batches"]["padded"], "sequence_output"),
            cell(r["batches"]["padded"], "pooled_output"),
            cell(r["batches"]["pairs"], "sequence_output"),
            cell(r["batches"]["pairs"], "pooled_output"),
            "yes" if r["passed"] else "NO",
        ]
        for name, r in results.items()
    ]
    print(
        table(
            rows,
            [
                "model",
                "family",
                "layers",
                "hidden",
                "load s",
                "padded seq",
                "padded pooled",
                "pairs seq",
                "pairs pooled",
                f"<= {TOLERANCE:g}",
            ],
        )
    )


def main(argv=None) -> dict:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import trainer

    trainer.import_tensorflow()
    import transformers

    transformers.logging.disable_progress_bar()  # a bar per save and load, not a result
    started_on = machine()  # its load average is the one at the start
    cache_dir = os.path.join(WORK, "encoder_parity_cache")
    results = {}
    for name in args.models.split(","):
        results[name] = check(name, published_encoders.checkpoint(name), args.seq_length, cache_dir)
        print(f"{name}: max abs difference {results[name]['max_difference']:.1e}", flush=True)
    with printed() as text:
        print(
            f"max abs difference of the last hidden states (and pooled output) from transformers' "
            f"PyTorch forward, float32, random weights at the published configs, seq_length "
            f"{args.seq_length}; load average {os.getloadavg()[0]:.1f} at the end"
        )
        report(results)
    result = {
        "machine": started_on,
        "seq_length": args.seq_length,
        "tolerance": TOLERANCE,
        "results": results,
        "load_average_at_end": os.getloadavg(),
    }
    if args.publish:
        publish("encoder_parity", result, text.getvalue())
    return finish(result, args.json)


if __name__ == "__main__":
    main()
