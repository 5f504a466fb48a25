"""The reference bench/ner.py measures the trainer's tagging against: transformers' token
classification in PyTorch, as its run_ner example trains it.

    python bench/ner_reference.py --encoder DIR --train FILE --dev FILE --epochs 3 \
        --learning-rate 5e-5 --batch-size 32 --max-length 128 --output result.json

- `AutoModelForTokenClassification` on the same weights, a fresh linear head;
- words tokenized with `is_split_into_words=True`, each word's label on its first piece and -100
  on the rest (run_ner's default, `label_all_tokens=False`), cut at `--max-length` pieces;
- AdamW (no weight decay on biases and LayerNorm weights), linear warm-up over
  `--warmup-fraction` of the steps then linear decay to 0, gradients clipped to norm 1.0 (the
  Trainer's defaults); batches shuffled each epoch and padded to their longest row
  (DataCollatorForTokenClassification's dynamic padding);
- dev scored after every epoch by the same entity rules as the trainer (seqeval's strict IOB2:
  trainer/tasks/tagging/metrics.py), the files read by the same reader.

Training seconds leave out the evaluations, as the trainer's metrics.json `durations.train` does.

With `--checkpoint DIR` each finished epoch is kept there (weights, optimizer, schedule, random
states, the seconds and scores so far), and a rerun with the same arguments on the same CPU model
goes on from it on the same trajectory an unbroken run takes; what it kept there is removed once
the result is written. all-mpnet-base-v2 on WikiANN runs over two hours in float32 on 2 cores: a
killed run loses one epoch, not all of them.
"""

import argparse
import os
import random
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import hardware, write_json  # noqa: E402

from trainer.tasks.tagging import files, metrics  # noqa: E402
from trainer.tasks.tagging import tags as iob2

IGNORED = -100  # what torch's cross-entropy skips


def words_of(sentence) -> list:
    return [sentence.text[a:b] for a, b in sentence.words]


def encode(tokenizer, sentences, tag_index, max_length):
    """Per sentence: (input ids, labels on first pieces, the position of each word's first piece)."""
    encoded = tokenizer(
        [words_of(s) for s in sentences], is_split_into_words=True, truncation=True, max_length=max_length
    )
    rows = []
    for index, sentence in enumerate(sentences):
        word_ids = encoded.word_ids(index)
        labels, firsts, previous = [], {}, None
        for position, word in enumerate(word_ids):
            first = word is not None and word != previous
            labels.append(tag_index.get(sentence.tags[word], 0) if first else IGNORED)
            if first:
                firsts[word] = position
            previous = word
        rows.append((encoded["input_ids"][index], labels, firsts))
    return rows


def batches(rows, batch_size, pad_id, order):
    for start in range(0, len(order), batch_size):
        chosen = [rows[i] for i in order[start : start + batch_size]]
        width = max(len(ids) for ids, _, _ in chosen)
        ids = torch.full((len(chosen), width), pad_id, dtype=torch.long)
        labels = torch.full((len(chosen), width), IGNORED, dtype=torch.long)
        mask = torch.zeros((len(chosen), width), dtype=torch.long)
        for row, (piece_ids, tags, _) in enumerate(chosen):
            ids[row, : len(piece_ids)], mask[row, : len(piece_ids)] = torch.tensor(piece_ids), 1
            labels[row, : len(tags)] = torch.tensor(tags)
        yield order[start : start + batch_size], ids, mask, labels


def evaluate(model, rows, sentences, names, pad_id, batch_size=64) -> dict:
    """Entity scores on dev: a word cut by --max-length is tagged O."""
    model.eval()
    predicted = [["O"] * len(s.tags) for s in sentences]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    with torch.no_grad():
        for chosen, ids, mask, _ in batches(rows, batch_size, pad_id, order):
            best = model(input_ids=ids, attention_mask=mask).logits.argmax(-1).numpy()
            for row, index in enumerate(chosen):
                for word, position in rows[index][2].items():
                    predicted[index][word] = names[best[row, position]]
    model.train()
    return metrics.entity_scores([list(s.tags) for s in sentences], predicted)


def arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--encoder", "--train", "--dev", "--output"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--learning-rate", type=float, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--warmup-fraction", type=float, default=0.1)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--checkpoint", help="a directory that keeps each finished epoch (see above)")
    return parser.parse_args(argv)


def setup(args):
    """The model, its optimizer and schedule, and the encoded files, as run_ner builds them."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer, get_linear_schedule_with_warmup

    random.seed(args.seed), np.random.seed(args.seed), torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count())
    train = files.read(args.train, "--train").sentences
    dev = files.read(args.dev, "--dev").sentences
    names = iob2.tag_names(sorted({t[2:] for s in train for t in s.tags if t != iob2.OUTSIDE}))
    index = {name: i for i, name in enumerate(names)}
    tokenizer = AutoTokenizer.from_pretrained(args.encoder)
    train_rows = encode(tokenizer, train, index, args.max_length)
    dev_rows = encode(tokenizer, dev, index, args.max_length)  # its labels are never read
    model = AutoModelForTokenClassification.from_pretrained(args.encoder, num_labels=len(names))
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.learning_rate,
    )
    steps = args.epochs * -(-len(train_rows) // args.batch_size)
    return {
        "model": model,
        "optimizer": optimizer,
        "names": names,
        "pad_id": tokenizer.pad_token_id,
        "schedule": get_linear_schedule_with_warmup(optimizer, int(args.warmup_fraction * steps), steps),
        "train_rows": train_rows,
        "dev": dev,
        "dev_rows": dev_rows,
    }


def train_epoch(args, run, epoch) -> tuple:
    """One shuffled pass: its seconds and mean loss."""
    model, optimizer, schedule = run["model"], run["optimizer"], run["schedule"]
    order = list(range(len(run["train_rows"])))
    random.shuffle(order)
    start, total = time.perf_counter(), 0.0
    for done, (_, ids, mask, labels) in enumerate(batches(run["train_rows"], args.batch_size, run["pad_id"], order), 1):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step(), schedule.step(), optimizer.zero_grad()
        total += loss.item()
        if done % 100 == 0:
            rate = done * args.batch_size / (time.perf_counter() - start)
            print(f"epoch {epoch} batch {done} loss {loss.item():.4f} {rate:.1f} sentences/s", flush=True)
    return time.perf_counter() - start, total / done


def settings(args) -> dict:
    """What a kept epoch must have been trained with to be gone on from: the arguments and the
    hardware (CPU model, cores, native arithmetic), so that one run's seconds come from one CPU."""
    kept = {k: v for k, v in vars(args).items() if k not in ("output", "checkpoint")}
    return {**kept, "machine": hardware()}


def save(args, run, progress) -> None:
    """The finished epochs, written whole (a temporary file renamed) so a kill never leaves half."""
    os.makedirs(args.checkpoint, exist_ok=True)
    path = os.path.join(args.checkpoint, "state.pt")
    torch.save(
        {
            "settings": settings(args),
            "progress": progress,
            "model": run["model"].state_dict(),
            "optimizer": run["optimizer"].state_dict(),
            "schedule": run["schedule"].state_dict(),
            "random": random.getstate(),
            "torch": torch.get_rng_state(),
        },
        path + ".tmp",
    )
    os.replace(path + ".tmp", path)


def kept(args):
    """The state save() left in --checkpoint, refused if its settings are not these; else None."""
    path = os.path.join(args.checkpoint or "", "state.pt")
    if not args.checkpoint or not os.path.exists(path):
        return None
    state, these = torch.load(path, weights_only=False), settings(args)
    if state["settings"] != these:
        print(
            f"error: --checkpoint {args.checkpoint} was trained with {state['settings']}, not "
            f"{these}: remove it to start over",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return state


def restore(run, state) -> dict:
    """The kept progress ({"seconds", "history"}) with its states restored; a fresh one without."""
    if state is None:
        return {"seconds": 0.0, "history": []}
    run["model"].load_state_dict(state["model"])
    run["optimizer"].load_state_dict(state["optimizer"])
    run["schedule"].load_state_dict(state["schedule"])
    random.setstate(state["random"]), torch.set_rng_state(state["torch"])
    print(f"going on from the {len(state['progress']['history'])} epoch(s) kept", flush=True)
    return state["progress"]


def main(argv=None):
    args = arguments(argv)
    state = kept(args)  # refused before minutes of loading, not after
    run = setup(args)
    progress = restore(run, state)
    del state  # the kept tensors, copied into the model and optimizer: 1.3 GB for all-mpnet-base-v2
    run["model"].train()
    for epoch in range(len(progress["history"]) + 1, args.epochs + 1):
        seconds, loss = train_epoch(args, run, epoch)
        progress["seconds"] += seconds
        scores = evaluate(run["model"], run["dev_rows"], run["dev"], run["names"], run["pad_id"])
        progress["history"].append(
            {
                "epoch": epoch,
                "loss": loss,
                "f1": scores["f1"],
                "precision": scores["precision"],
                "recall": scores["recall"],
                "train_seconds": progress["seconds"],
            }
        )
        print(f"epoch {epoch}: dev entity F1 {scores['f1']:.4f}, {progress['seconds']:.0f} s training", flush=True)
        if args.checkpoint:
            save(args, run, progress)
    best = max(progress["history"], key=lambda h: h["f1"])
    write_json(
        args.output,
        {
            "train_seconds": progress["seconds"],
            "history": progress["history"],
            "best_epoch": best["epoch"],
            "f1": best["f1"],
            "precision": best["precision"],
            "recall": best["recall"],
            "sentences": len(run["train_rows"]),
            "torch": torch.__version__,
        },
    )
    if args.checkpoint:  # what save() wrote, and the directory if that leaves it empty
        os.remove(os.path.join(args.checkpoint, "state.pt"))
        if not os.listdir(args.checkpoint):
            os.rmdir(args.checkpoint)


if __name__ == "__main__":
    main()
