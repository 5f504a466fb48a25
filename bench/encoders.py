"""Benchmark: training and prediction speed of every encoder README's Encoders table lists, on this CPU.

    python bench/encoders.py                     # every encoder, 3 rounds of 10 steps each
    python bench/encoders.py --encoders bert-mini,electra-small --publish
    python bench/encoders.py --encoders roberta-base,deberta-v3-base,modernbert-base --publish

Nothing is downloaded. Speed depends on an encoder's shapes, not on its weights, so each listed
encoder is written as a Hugging Face checkpoint of its published shape (layers, widths, heads,
the 30,522-piece uncased vocabulary all of them use, copied from the packaged default encoder)
with random weights, and passed to the trainer as `--encoder DIR`. The default encoder runs
from its real packaged weights, as the baseline every ratio is against, in the same run. Each
encoder is one `bench/steps.py` process: the trainer's own training step on TweetEval rows
(bucketed padding, the run's mixed precision, frozen word embeddings), median of the rounds,
then the same model's forward in inference (training=False) on as many of those batches.

The native families (RoBERTa, XLM-RoBERTa, MPNet, DeBERTa-v3, ModernBERT) are written at their
published configs by transformers itself (bench/published_encoders.py), with their family's
tiny test tokenizer (tests/reference_<family>.py): a few hundred pieces, which split a tweet
into more tokens than the published vocabulary would (byte-level BPE, SentencePiece) or fewer
(MPNet's word list, where most words are one [UNK]). The table gives each row's mean tokens:
those rows' speed is at that length, not at the real tokenizer's. Encoders wider than 768
(roberta-large) run a third of --steps per round.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "helpers"))
import published_encoders  # noqa: E402
from common import WORK, add_publish_flag, finish, machine, printed, publish, table  # noqa: E402

DEFAULT = "minilm-l6-h384-uncased"


def _shape(layers, hidden, heads, model_type="bert", embedding_size=None):
    config = {
        "architectures": ["BertModel" if model_type == "bert" else "ElectraModel"],
        "model_type": model_type,
        "vocab_size": 30522,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * hidden,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
    }
    return {**config, "embedding_size": embedding_size} if embedding_size else config


# README's Encoders table, by the name the table gives them; shapes from their config.json.
SHAPES = {
    "bert-tiny (small-bert-l2-h128-uncased)": _shape(2, 128, 2),
    "bert-mini (small-bert-l4-h256-uncased)": _shape(4, 256, 4),
    "bert-small (small-bert-l4-h512-uncased)": _shape(4, 512, 8),
    "bert-medium (small-bert-l8-h512-uncased)": _shape(8, 512, 8),
    "bert-base-uncased": _shape(12, 768, 12),
    "hf:google/electra-small-discriminator": _shape(12, 256, 4, "electra", embedding_size=128),
    "hf:microsoft/MiniLM-L12-H384-uncased": _shape(12, 384, 12),
}


def short(name: str) -> str:
    return name.split(" ")[0].split("/")[-1]


def write_checkpoint(directory: str, config: dict) -> str:
    """config.json, random model.safetensors and the real uncased vocabulary; kept for reruns."""
    import tiny_bert
    from safetensors.numpy import save_file

    from trainer.modeling.encoders import registry

    if os.path.exists(os.path.join(directory, "model.safetensors")):
        return directory
    os.makedirs(directory, exist_ok=True)
    shutil.copy(os.path.join(registry.packaged_default_dir(), "vocab.txt"), directory)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True}, f)
    save_file(tiny_bert.hf_weights(config, seed=0, scale=0.02), os.path.join(directory, "model.safetensors.part"))
    os.replace(os.path.join(directory, "model.safetensors.part"), os.path.join(directory, "model.safetensors"))
    return directory


def described(directory: str) -> dict:
    """Layers, width and parameter count of a checkpoint, from its config.json and the
    safetensors header (no weights are read)."""
    from safetensors import safe_open

    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    with safe_open(os.path.join(directory, "model.safetensors"), "np") as weights:
        count = sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
    return {"layers": config["num_hidden_layers"], "hidden": config["hidden_size"], "parameters": count}


def steps(encoder: str, label: str, args, work: str, count: int) -> dict:
    """One bench/steps.py process: the trainer's step with `--encoder encoder`, `count` steps
    per round, and prediction on as many batches."""
    out = os.path.join(work, f"{label}.json")
    command = [
        sys.executable,
        os.path.join(HERE, "steps.py"),
        "--rows",
        str(args.rows),
        "--steps",
        str(count),
        "--rounds",
        str(args.rounds),
        "--predict",
        "--json",
        out,
        "--",
        "--encoder",
        encoder,
        "--cache-dir",
        os.path.join(work, "cache"),
    ]
    subprocess.run(command, check=True)
    with open(out) as f:
        return json.load(f)


def measured(encoder: str, directory: str, label: str, args, work: str) -> dict:
    """An encoder's size, its training and prediction examples/s and the mean tokens per row."""
    size = described(directory)
    count = args.steps if size["hidden"] <= 768 else max(2, args.steps // 3)
    speed = steps(encoder, label, args, work, count)
    return {
        **size,
        "steps": count,
        "mean_tokens": speed["mean_tokens"],
        "examples_per_second": speed["median"],
        "predict_examples_per_second": speed["predict_examples_per_second"],
    }


def rows(results: dict) -> list:
    """The table's rows; ratios are against the first (the default encoder)."""
    base = next(iter(results.values()))
    train, predict = base["examples_per_second"], base["predict_examples_per_second"]
    return [
        [
            name,
            str(r["layers"]),
            str(r["hidden"]),
            f"{r['parameters'] / 1e6:.1f}M",
            f"{r['mean_tokens']:.1f}",
            f"{r['examples_per_second']:.1f}",
            f"{r['examples_per_second'] / train:.2f}x",
            f"{r['predict_examples_per_second']:.1f}",
            f"{r['predict_examples_per_second'] / predict:.2f}x",
        ]
        for name, r in results.items()
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [short(n) for n in SHAPES] + list(published_encoders.PUBLISHED)
    parser.add_argument("--encoders", default=",".join(names), help="which of: " + ", ".join(names))
    parser.add_argument("--rows", type=int, default=2000, help="TweetEval training rows")
    parser.add_argument("--steps", type=int, default=10, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=3)
    add_publish_flag(parser)
    args = parser.parse_args()
    chosen = {name: config for name, config in SHAPES.items() if short(name) in args.encoders.split(",")}
    work = os.path.join(WORK, "encoders")
    os.makedirs(work, exist_ok=True)
    from trainer.modeling.encoders import registry

    # {row name: (--encoder, its checkpoint directory)}; the first is every ratio's baseline.
    encoders = {f"{DEFAULT} (real weights)": (DEFAULT, registry.packaged_default_dir())}
    for name, config in chosen.items():
        directory = write_checkpoint(os.path.join(work, short(name)), config)
        encoders[name] = (directory, directory)
    for name in args.encoders.split(","):
        if name in published_encoders.PUBLISHED:
            directory = published_encoders.checkpoint(name)
            encoders[f"{name} ({published_encoders.PUBLISHED[name].family})"] = (directory, directory)
    started_on = machine()  # its load average is the one at the start
    results = {
        name: measured(encoder, directory, short(name), args, work) for name, (encoder, directory) in encoders.items()
    }
    with printed() as text:
        print(
            f"examples/s, TweetEval rows, batch 32, median of {args.rounds} rounds of "
            f"{args.steps} steps ({max(2, args.steps // 3)} wider than 768); load average "
            f"{os.getloadavg()[0]:.1f} at the end"
        )
        print(
            table(
                rows(results),
                [
                    "encoder",
                    "layers",
                    "hidden",
                    "parameters",
                    "tokens/row",
                    "train ex/s",
                    "vs default",
                    "predict ex/s",
                    "vs default",
                ],
            )
        )
    result = {
        "machine": started_on,
        "rows": args.rows,
        "steps": args.steps,
        "rounds": args.rounds,
        "results": results,
        "load_average_at_end": os.getloadavg(),
    }
    finish(result, os.path.join(work, "encoders.json"))
    if args.publish:
        print(f"wrote {publish('encoders', result, text.getvalue())}")


if __name__ == "__main__":
    main()
