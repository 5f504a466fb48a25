"""Benchmark: the in-graph tokenizers give Hugging Face's fast tokenizer's ids on real text.

    python bench/tokenizer_parity.py --kind sentencepiece --publish

For each tokenizer kind it trains small vocabularies on real texts of ../shared/data (the
published checkpoints' files cannot be downloaded here), builds transformers' fast tokenizer
from the same files, and counts the OTHER real texts (single texts, held out from training)
on which the package's tokenizer gives exactly Hugging Face's `input_ids` (no special tokens
added). It prints equal / total per data set and family, and the first differing texts.
"""

import argparse
import csv
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]
from common import finish, printed, publish, table  # noqa: E402

DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
SHOWN_DIFFERENCES = 5


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=sorted(KINDS), required=True)
    parser.add_argument("--vocab-size", type=int, default=8000, help="of the trained vocabularies")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--publish", action="store_true", help="also write them to bench/results/")
    return parser.parse_args(argv)


def _lines(path):
    with open(path, encoding="utf-8", newline="") as f:
        return [line for line in f.read().split("\n") if line]


def _column(path, column, delimiter=",", rows=None):
    with open(path, encoding="utf-8", newline="") as f:
        values = [row[column] for row in csv.DictReader(f, delimiter=delimiter)]
    return values[:rows]


def texts():
    """(training texts, {data set: held-out texts}): held-out texts never occur in training."""
    train = (
        _lines(os.path.join(DATA, "tweeteval", "test_text.txt"))
        + _column(os.path.join(DATA, "sst2", "train.tsv"), "sentence", "\t", 20000)
        + _column(os.path.join(DATA, "glue", "mrpc_train.csv"), "sentence1")
        + _column(os.path.join(DATA, "glue", "mrpc_train.csv"), "sentence2")
        + _column(os.path.join(DATA, "imdb", "train.csv"), "text", rows=2000)
    )
    seen = set(train)
    held_out = {
        "tweeteval val": _lines(os.path.join(DATA, "tweeteval", "val_text.txt")),
        "sst2 dev": _column(os.path.join(DATA, "sst2", "dev.tsv"), "sentence", "\t", 1000),
        "mrpc dev sentence1": _column(os.path.join(DATA, "glue", "mrpc_dev.csv"), "sentence1", rows=1000),
        "imdb dev": _column(os.path.join(DATA, "imdb", "dev.csv"), "text", rows=300),
    }
    return train, {name: sorted(set(t for t in values if t not in seen)) for name, values in held_out.items()}


def compare(ours, hf, held_out: dict) -> dict:
    """{data set: {"equal", "total", "differences": first few (text, HF ids, ours)}}."""
    import tensorflow as tf

    result = {}
    for name, values in held_out.items():
        got = [ours.tokenize(tf.constant(values[i : i + 256])).to_list() for i in range(0, len(values), 256)]
        got = [ids for batch in got for ids in batch]
        want = hf(values, add_special_tokens=False)["input_ids"]
        differing = [(t, w, g) for t, w, g in zip(values, want, got) if w != g]
        result[name] = {
            "equal": len(values) - len(differing),
            "total": len(values),
            "differences": differing[:SHOWN_DIFFERENCES],
        }
    return result


def sentencepiece(train: list, held_out: dict, vocab_size: int, work: str) -> dict:
    """XLM-RoBERTa and DeBERTa-v3 layouts of a unigram model trained with the sentencepiece
    library (nmt_nfkc, as both published models), against transformers' fast tokenizers."""
    import sentencepiece as spm
    import transformers

    from trainer.modeling.encoders.models import deberta_v2, roberta
    from trainer.modeling.encoders.tokenizers.sentencepiece import SentencePieceTokenizer

    layouts = {
        "xlm-roberta": ("sentencepiece.bpe.model", transformers.XLMRobertaTokenizerFast, {}),
        "deberta-v3": (
            "spm.model",
            transformers.DebertaV2TokenizerFast,
            dict(
                pad_id=0,
                bos_id=1,
                eos_id=2,
                unk_id=3,
                pad_piece="[PAD]",
                bos_piece="[CLS]",
                eos_piece="[SEP]",
                unk_piece="[UNK]",
            ),
        ),
    }
    result = {}
    for family, (filename, fast_class, options) in layouts.items():
        directory = os.path.join(work, family)
        os.makedirs(directory)
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(train),
            model_prefix=os.path.join(directory, "m"),
            model_type="unigram",
            vocab_size=vocab_size,
            character_coverage=0.9995,
            num_threads=1,
            minloglevel=2,
            **options,
        )
        os.replace(os.path.join(directory, "m.model"), os.path.join(directory, filename))
        ours = SentencePieceTokenizer(
            os.path.join(directory, filename),
            {"xlm-roberta": roberta.SENTENCEPIECE, "deberta-v3": deberta_v2.SENTENCEPIECE}[family],
        )
        result[family] = compare(ours, fast_class.from_pretrained(directory), held_out)
    return result


def train_byte_level_bpe(texts: list, vocab_size: int, directory: str, added=()) -> dict:
    """Both byte-level BPE layouts, trained with the tokenizers library: {family: files}.

    "roberta": vocab.json and merges.txt (ByteLevelBPETokenizer, RoBERTa's special tokens);
    "modernbert": tokenizer.json as ModernBERT ships one (BPE, NFC, ByteLevel, [MASK] with
    lstrip), with the tokenizers.AddedToken `added` too."""
    from tokenizers import (
        AddedToken,
        ByteLevelBPETokenizer,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    roberta = ByteLevelBPETokenizer()
    roberta.train_from_iterator(
        texts,
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    roberta.save_model(directory)
    modernbert = Tokenizer(models.BPE())
    modernbert.normalizer = normalizers.NFC()
    modernbert.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    modernbert.decoder = decoders.ByteLevel()
    modernbert.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]"],
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    modernbert.add_special_tokens([AddedToken("[MASK]", lstrip=True, normalized=False)])
    modernbert.add_tokens(list(added))
    modernbert.save(os.path.join(directory, "tokenizer.json"))
    return {
        "roberta": (os.path.join(directory, "vocab.json"), os.path.join(directory, "merges.txt")),
        "modernbert": (os.path.join(directory, "tokenizer.json"),),
    }


def byte_pair(train: list, held_out: dict, vocab_size: int, work: str) -> dict:
    """RoBERTa's and ModernBERT's layouts against RobertaTokenizerFast(vocab_file, merges_file)
    and PreTrainedTokenizerFast(tokenizer_file=...)."""
    import transformers

    from trainer.modeling.encoders.models import roberta
    from trainer.modeling.encoders.tokenizers.byte_pair import BytePairTokenizer

    files = train_byte_level_bpe(train, vocab_size, work)
    return {
        "roberta": compare(
            BytePairTokenizer.from_vocab_and_merges(*files["roberta"], roberta.ADDED_TOKENS),
            transformers.RobertaTokenizerFast(*files["roberta"]),
            held_out,
        ),
        "modernbert": compare(
            BytePairTokenizer.from_tokenizer_json(*files["modernbert"]),
            transformers.PreTrainedTokenizerFast(tokenizer_file=files["modernbert"][0]),
            held_out,
        ),
    }


KINDS = {"sentencepiece": sentencepiece, "byte_pair": byte_pair}


def report(results: dict) -> None:
    rows = [
        [family, name, f"{c['equal']:,}", f"{c['total']:,}", f"{100 * c['equal'] / c['total']:.2f}%"]
        for family, sets in results.items()
        for name, c in sets.items()
    ]
    print(table(rows, ["family", "held-out texts", "equal ids", "texts", "equal"]))
    for family, sets in results.items():
        for name, counts in sets.items():
            for text, want, got in counts["differences"]:
                print(f"\n{family}, {name}: {text!r}\n  Hugging Face {want}\n  ours         {got}")


def main(argv=None) -> dict:
    args = parse_args(argv)
    import trainer

    trainer.import_tensorflow()
    train, held_out = texts()
    with tempfile.TemporaryDirectory() as work:
        results = KINDS[args.kind](train, held_out, args.vocab_size, work)
    with printed() as text:
        print(f"{args.kind}: vocabularies of {args.vocab_size:,} trained on {len(train):,} texts")
        report(results)
    if args.publish:
        publish(
            "tokenizer_parity",
            {"kind": args.kind, "vocab_size": args.vocab_size, "results": results},
            text.getvalue(),
            part=args.kind,
        )
    return finish({"kind": args.kind, "results": results}, args.json)


if __name__ == "__main__":
    main()
