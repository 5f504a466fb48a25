"""The reference bench/embedding.py will measure the trainer's `--task embedding` against:
sentence-transformers' own trainer with CoSENTLoss on scored sentence pairs, as the library's STS-B
example (training_stsbenchmark.py) trains it.

    python bench/embedding_reference.py --encoder DIR --train FILE [--validation FILE] \
        [--epochs 4] [--learning-rate 5e-5] [--batch-size 16] [--max-length L] \
        [--warmup-fraction 0.1] [--seed 42] [--bf16] --output result.json

- the model: `SentenceTransformer(DIR)` when DIR holds sentence-transformers' modules.json (the
  default encoder does: its Transformer, mean Pooling and Normalize); otherwise what the library
  builds for a plain Hugging Face checkpoint, models.Transformer + models.Pooling("mean"), said
  on stdout and in the result;
- the loss: CoSENTLoss (the issue's choice; the example's active line is CosineSimilarityLoss and
  CoSENTLoss its alternative) on scores divided by the training file's highest score, as the
  example's data set holds STS-B's 0-5 scores divided by 5. CoSENT compares only the order of two
  pairs' scores, and Spearman only their ranks, so the scale changes neither;
- the recipe: SentenceTransformerTrainer with the example's settings unless a flag says otherwise
  (4 epochs, batch 16, learning rate 5e-5 decaying linearly after a warm-up over 10% of the steps,
  no weight decay, gradients clipped to norm 1, seed 42; the model's own max_seq_length, 256 for
  all-MiniLM-L6-v2), in float32 on the CPU (the example's fp16 is for GPUs; --bf16: torch's
  bfloat16 autocast, the CPU's counterpart, as the trainer's mixed bfloat16 on a CPU with native
  bfloat16), the last epoch's weights kept (the example does not load the best);
- the score: the library's EmbeddingSimilarityEvaluator, Spearman of the cosine similarity of
  the validation pairs against their scores, before training (zero-shot) and after every epoch;
  training seconds count the epochs alone, not loading or the evaluations;
- the pairs: read by the trainer's own reader (trainer.reading: the same rows, columns found by
  the same names), so the trainer's side trains and scores on exactly these rows.

Without --validation the training file is split, seeded (--validation-fraction of its pairs held
out), into two files under --split-dir that the trainer's side reads too. STS-B's pairs share
sentences (a sentence is scored against several others), and a validation pair whose sentence the
model trained on scores higher than a new one would, as issue 65's SST-2 phrases did. So pairs
that share a sentence (compared by their words: case, spacing and punctuation aside) are held out
together: the split is of groups of pairs linked by shared sentences, no validation sentence
occurs in a training pair, and no pair is dropped. The result records how many validation pairs a
plain split of pairs would have left sharing a sentence with training, and how many validation
sentences still occur inside a longer training sentence (trainer.data.leakage's count, which a
split cannot remove: it is recorded, not hidden).

Deterministic with --seed on one machine: the same split, batches, dropout and scores.
"""

import csv
import os
import random
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import WORK, hardware, write_json  # noqa: E402

from trainer import cli, reading  # noqa: E402
from trainer.data import leakage  # noqa: E402
from trainer.errors import UserError  # noqa: E402

SCORE_COLUMNS = ("score", "similarity", *reading.LABEL_COLUMNS)
PROGRESS_STEPS = 50  # a line every this many batches: an epoch of STS-B on 2 cores takes minutes
# The example's settings (training_stsbenchmark.py and SentenceTransformerTrainingArguments').
EXAMPLE = {"epochs": 4, "batch_size": 16, "learning_rate": 5e-5, "warmup_fraction": 0.1, "seed": 42}


class Pairs:
    """Scored sentence pairs of one file, in its order, with the lines they were read from."""

    def __init__(self, path: str, flag: str, args):
        frame = reading.read_files(path, flag)
        first, second = reading.pick_text_columns(frame, args.text_column, args.text_pair_column)
        if second is None:
            raise UserError(f"{path}: one text column found ({first!r}); scored pairs need two (--text-pair-column)")
        score = reading.pick_column(frame, args.score_column, SCORE_COLUMNS, "--score-column", "score")
        self.path, self.columns = path, (first, second, score)
        self.first = [str(t) for t in frame[first]]
        self.second = [str(t) for t in frame[second]]
        self.raw_scores = [str(s) for s in frame[score]]
        self.scores = np.array([number(frame, i, score) for i in range(len(frame))], np.float64)

    def __len__(self):
        return len(self.first)


def number(frame, index: int, column: str) -> float:
    value = frame[column].iloc[index]
    try:
        result = float(value)
    except (TypeError, ValueError):
        result = float("nan")
    if not np.isfinite(result):
        raise UserError(f"{reading.where(frame, index, column)}: {value!r} is not a similarity score (a number)")
    return result


def sentence_key(text: str) -> tuple:
    """What makes two sentences one: their words (leakage.words), so case and punctuation do
    not hide a repeat."""
    return leakage.words(text)


def groups(pairs: Pairs) -> list:
    """Each pair's group: pairs linked by a shared sentence, directly or through others, share one
    (union-find over sentences)."""
    parent = {}

    def root(key):
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for a, b in zip(pairs.first, pairs.second):
        parent[root(sentence_key(a))] = root(sentence_key(b))
    return [root(sentence_key(a)) for a in pairs.first]


def split_rows(pairs: Pairs, fraction: float, seed: int) -> tuple:
    """(training rows, validation rows): whole groups of pairs, in a seeded order, held out until
    `fraction` of the pairs are."""
    group_of = groups(pairs)
    members = {}
    for row, group in enumerate(group_of):
        members.setdefault(group, []).append(row)
    order = list(members)  # in the order of their first pairs, then shuffled by the seed
    random.Random(seed).shuffle(order)
    held, target = set(), round(fraction * len(pairs))
    for group in order:
        if len(held) >= target:
            break
        held.update(members[group])
    validation = sorted(held)
    return [r for r in range(len(pairs)) if r not in held], validation


def plain_split_leaks(pairs: Pairs, fraction: float, seed: int) -> int:
    """Validation pairs of a plain seeded split of pairs (no grouping) that share a sentence with
    a training pair: what the grouping prevents."""
    rows = list(range(len(pairs)))
    random.Random(seed).shuffle(rows)
    held = set(rows[: round(fraction * len(pairs))])
    seen = {sentence_key(t) for r in rows if r not in held for t in (pairs.first[r], pairs.second[r])}
    return sum(1 for r in held if {sentence_key(pairs.first[r]), sentence_key(pairs.second[r])} & seen)


def write_rows(path: str, pairs: Pairs, rows: list) -> None:
    """The rows as CSV with the file's own column names and score texts, written whole; a file
    already there is kept only if it holds the same bytes (an earlier run's split), never replaced."""
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".csv.tmp")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(pairs.columns)
        writer.writerows((pairs.first[r], pairs.second[r], pairs.raw_scores[r]) for r in rows)
    with open(temporary, "rb") as f:
        written = f.read()
    if os.path.exists(path):
        os.remove(temporary)
        with open(path, "rb") as f:
            if f.read() != written:
                raise UserError(f"--split-dir: {path} holds another split (of another file?): remove it to split again")
        return
    os.replace(temporary, path)


def split(args) -> tuple:
    """(training file, validation file, what the split did) from --train, written to --split-dir."""
    pairs = Pairs(args.train, "--train", args)
    train_rows, validation_rows = split_rows(pairs, args.validation_fraction, args.seed)
    if not train_rows or not validation_rows:
        raise UserError(
            f"--validation-fraction: {args.validation_fraction} of {args.train}'s {len(pairs)} pairs leaves "
            f"{len(train_rows)} to train on and {len(validation_rows)} to score"
        )
    stem = os.path.splitext(os.path.basename(args.train))[0]
    folder = os.path.join(args.split_dir, f"{stem}-fraction{args.validation_fraction:g}-seed{args.seed}")
    os.makedirs(folder, exist_ok=True)
    paths = os.path.join(folder, "train.csv"), os.path.join(folder, "validation.csv")
    write_rows(paths[0], pairs, train_rows)
    write_rows(paths[1], pairs, validation_rows)
    record = {
        "from": args.train,
        "fraction": args.validation_fraction,
        "seed": args.seed,
        "pairs": len(pairs),
        "train_pairs": len(train_rows),
        "validation_pairs": len(validation_rows),
        "dropped_pairs": len(pairs) - len(train_rows) - len(validation_rows),
        "validation_pairs_sharing_a_sentence_in_a_plain_split": plain_split_leaks(
            pairs, args.validation_fraction, args.seed
        ),
    }
    return paths[0], paths[1], record


def sentence_model(encoder: str, max_length):
    """(SentenceTransformer, how it was built) from a local directory, on the CPU."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules

    if os.path.isfile(os.path.join(encoder, "modules.json")):
        model, built = SentenceTransformer(encoder, device="cpu"), "its modules.json"
    else:
        transformer = modules.Transformer(encoder)
        pooling = modules.Pooling(transformer.get_embedding_dimension(), "mean")
        model = SentenceTransformer(modules=[transformer, pooling], device="cpu")
        built = "no modules.json: models.Transformer + models.Pooling('mean'), as the library builds a plain checkpoint"
        print(f"{encoder}: {built}", flush=True)
    if max_length:
        model.max_seq_length = max_length
    return model, built


def evaluator(pairs: Pairs, top: float, batch_size: int):
    """The library's evaluator of the validation pairs (Spearman of cosine similarity)."""
    from sentence_transformers import SimilarityFunction
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    return EmbeddingSimilarityEvaluator(
        pairs.first,
        pairs.second,
        list(pairs.scores / top),
        batch_size=batch_size,
        main_similarity=SimilarityFunction.COSINE,
        name="validation",
        write_csv=False,
    )


def spearman(evaluate, model) -> float:
    return float(evaluate(model)["validation_spearman_cosine"])


def epochs_scored(evaluate, model, history: list):
    """A callback timing each epoch and scoring the model after it, outside its time."""
    from transformers import TrainerCallback

    class Scored(TrainerCallback):
        def on_epoch_begin(self, args, state, control, **kwargs):
            self.start, self.first_step = time.perf_counter(), state.global_step

        def on_step_end(self, args, state, control, **kwargs):
            steps = state.global_step - self.first_step
            if steps % PROGRESS_STEPS == 0:
                rate = steps * args.per_device_train_batch_size / (time.perf_counter() - self.start)
                print(f"epoch {len(history) + 1} batch {steps} {rate:.1f} pairs/s", flush=True)

        def on_epoch_end(self, args, state, control, **kwargs):
            seconds = time.perf_counter() - self.start
            history.append({"epoch": len(history) + 1, "seconds": seconds, "spearman": spearman(evaluate, model)})
            done = sum(h["seconds"] for h in history)
            print(f"epoch {len(history)}: Spearman {history[-1]['spearman']:.4f}, {done:.0f} s training", flush=True)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if history and "loss" in (logs or {}):
                history[-1]["loss"] = logs["loss"]

    return Scored()


def train(args, model, train_pairs: Pairs, top: float, callback, output_dir: str) -> None:
    """The example's SentenceTransformerTrainer run on the training pairs."""
    import datasets
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss
    from transformers import PrinterCallback

    data = datasets.Dataset.from_dict(
        {"sentence1": train_pairs.first, "sentence2": train_pairs.second, "score": list(train_pairs.scores / top)}
    )
    settings = SentenceTransformerTrainingArguments(
        output_dir=output_dir,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_fraction,  # below 1: a fraction of the steps (transformers 5)
        seed=args.seed,
        use_cpu=True,
        bf16=args.bf16,
        eval_strategy="no",
        save_strategy="no",
        logging_strategy="epoch",
        report_to="none",
        disable_tqdm=True,
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=settings, train_dataset=data, loss=CoSENTLoss(model), callbacks=[callback]
    )
    trainer.remove_callback(PrinterCallback)  # its dicts of figures: the callback prints each epoch's line
    trainer.train()


def arguments(argv):
    parser = cli.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", required=True, help="a checkpoint's directory (the default encoder's, say)")
    parser.add_argument("--train", required=True, help="scored pairs: sentence1,sentence2,score")
    parser.add_argument("--output", required=True, help="the result, as JSON")
    held = parser.add_mutually_exclusive_group()
    held.add_argument("--validation", help="scored pairs to score on (default: a split of --train, see above)")
    held.add_argument("--validation-fraction", type=float, default=0.1)
    parser.add_argument("--split-dir", default=os.path.join(WORK, "embedding"), help="where the split is written")
    parser.add_argument("--epochs", type=int, default=EXAMPLE["epochs"])
    parser.add_argument("--learning-rate", type=float, default=EXAMPLE["learning_rate"])
    parser.add_argument("--batch-size", type=int, default=EXAMPLE["batch_size"])
    parser.add_argument("--max-length", type=int, help="pieces per sentence (default: the model's max_seq_length)")
    parser.add_argument("--warmup-fraction", type=float, default=EXAMPLE["warmup_fraction"])
    parser.add_argument("--seed", type=int, default=EXAMPLE["seed"])
    parser.add_argument("--text-column", help="the first sentence's column (default: found by name)")
    parser.add_argument("--text-pair-column", help="the second sentence's column (default: found by name)")
    parser.add_argument("--score-column", help=f"the score's column (default: the first of {', '.join(SCORE_COLUMNS)})")
    parser.add_argument("--bf16", action="store_true", help="train under torch's bfloat16 autocast (default: float32)")
    parser.add_argument("--model-output", help="a new directory for the trained model, as the library saves it")
    args = parser.parse_args(argv)
    if not 0 < args.validation_fraction < 1:
        raise UserError(f"--validation-fraction: {args.validation_fraction} is not between 0 and 1")
    for flag in ("epochs", "batch_size"):
        if getattr(args, flag) < 1:
            raise UserError(f"--{flag.replace('_', '-')}: must be at least 1")
    if not os.path.isfile(os.path.join(args.encoder, "config.json")):
        raise UserError(f"--encoder: {args.encoder} holds no config.json: give a Hugging Face checkpoint's directory")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        raise UserError(f"--output: the directory of {args.output} does not exist")
    if args.model_output and os.path.exists(args.model_output):
        raise UserError(f"--model-output: {args.model_output} exists; name a new directory")
    return args


def versions() -> dict:
    import sentence_transformers
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
    }


def main(argv=None):
    args = arguments(argv)
    split_record = None
    if args.validation:
        train_file, validation_file = args.train, args.validation
    else:
        train_file, validation_file, split_record = split(args)
    train_pairs = Pairs(train_file, "--train", args)
    validation_pairs = Pairs(validation_file, "--validation", args)
    top = float(train_pairs.scores.max())
    if top <= 0:
        raise UserError(f"--train: {train_file}'s highest score is {top:g}; scores are scaled by it, so it must be > 0")
    held_sentences = sorted(set(validation_pairs.first + validation_pairs.second))
    trained_keys = {sentence_key(t) for t in train_pairs.first + train_pairs.second}

    import torch
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # bars of loading and saving weights, not of training
    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count())
    model, built = sentence_model(args.encoder, args.max_length)
    evaluate, history = evaluator(validation_pairs, top, args.batch_size), []
    zero_shot = spearman(evaluate, model)
    print(f"zero-shot: Spearman {zero_shot:.4f} on {len(validation_pairs)} validation pairs", flush=True)
    with tempfile.TemporaryDirectory() as scratch:  # the Trainer wants an output_dir; it saves nothing
        train(args, model, train_pairs, top, epochs_scored(evaluate, model, history), scratch)
    if args.model_output:
        model.save(args.model_output)
    write_json(
        args.output,
        {
            "spearman": history[-1]["spearman"],
            "zero_shot_spearman": zero_shot,
            "train_seconds": sum(h["seconds"] for h in history),
            "history": history,
            "train_file": train_file,
            "validation_file": validation_file,
            "split": split_record,
            "train_pairs": len(train_pairs),
            "validation_pairs": len(validation_pairs),
            "validation_sentences": len(held_sentences),
            "validation_sentences_in_training_pairs": sum(1 for t in held_sentences if sentence_key(t) in trained_keys),
            "validation_sentences_inside_longer_training_sentences": leakage.find_contained(
                held_sentences, train_pairs.first + train_pairs.second
            ).count,
            "score_scale": top,
            "model": built,
            "max_seq_length": model.max_seq_length,
            "precision": "bfloat16" if args.bf16 else "float32",
            "settings": {k: v for k, v in vars(args).items() if k not in ("output", "model_output")},
            "machine": hardware(),
            **versions(),
        },
    )


if __name__ == "__main__":
    sys.exit(cli.run(main))
