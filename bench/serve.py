"""Benchmark: `python -m trainer.serve` under 1, 4 and 16 concurrent clients against
`python -m trainer.predict` on the same model and texts, measured in one run.

    python bench/serve.py                          # trains a small model on the default encoder first
    python bench/serve.py --model-dir runs/x/model --texts 2000
    git worktree add /tmp/before 749a5f5~1   # the commit before the server could explain
    python bench/serve.py --baseline-checkout /tmp/before --rounds 2

Prints requests/s, examples/s and p50/p99 latency per client count, and each examples/s as a
share of the baseline: trainer.predict's batching (predict_texts, batch 128, texts sorted by
length) on the same texts after one warm-up call. The CLI's own figure, which also pays the
model's first call, is printed too. Traffic
goes to 127.0.0.1 only; every level sends a bounded number of requests with a timeout.
Data: TweetEval's validation tweets from ../shared/data when present, else the sample posts
shipped in the package (via bench/run.py's prepare_data). Nothing else should run meanwhile.

With --baseline-checkout, trainer.serve from that older checkout of this repository serves the
same model and texts too, float32, in ABBA order over --rounds (baseline, this tree, this tree,
baseline, ...) so that drift in the machine's speed falls on both alike; the table then gives
each client count's examples/s of this tree against the baseline's (e.g. whether a new feature
costs the requests that do not use it).
"""

import argparse
import csv
import os
import subprocess
import sys
import tempfile

import numpy as np
from common import ROOT, fmt, log, machine, printed, publish, table
from run import head_csv, prepare_data, run_ours, run_predict
from server_load import read_texts, serve_rates

TARGET_SHARE = 0.70  # the serving target: 16 clients reach this share of trainer.predict's ex/s


def warm_baseline(model_dir: str, texts_csv: str, batch_size: int = 128) -> float:
    """trainer.predict's own batching (predict_texts) on the same texts, after one warm-up call:
    the CLI's figure includes the model's first call, which the server pays before it is ready."""
    code = (
        "import sys, time, csv, trainer; trainer.import_tensorflow(); "
        "from trainer.serving import export; from trainer.inference import loaded_model; "
        "serve = export.load(sys.argv[1]); "
        "texts = [r['text'] for r in csv.DictReader(open(sys.argv[2], encoding='utf-8'))]; "
        "loaded_model.predict_texts(serve, texts[:256], int(sys.argv[3])); start = time.perf_counter(); "
        "loaded_model.predict_texts(serve, texts, int(sys.argv[3])); "
        "print(len(texts) / (time.perf_counter() - start))"
    )
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, "-c", code, model_dir, texts_csv, str(batch_size)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return float(result.stdout.strip().splitlines()[-1])


def trained_model(data: dict, args, work: str) -> str:
    """A small fine-tuning run on the default encoder: only its serving speed matters here."""
    train = head_csv(data["train"], args.train_examples, os.path.join(work, "train.csv"))
    log(f"training a small model ({args.train_examples} examples, 1 epoch) on the default encoder")
    return run_ours("serve-model", ["--max-seq-length", str(args.max_seq_length)], data, train, work)["model_dir"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", help="An exported model (default: train a small one first).")
    parser.add_argument("--texts", type=int, default=1000, help="Texts sent at each client count.")
    parser.add_argument("--instances-per-request", type=int, default=1)
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument(
        "--precisions",
        default="float32",
        help="trainer.serve --precision values to measure, e.g. float32,bfloat16 "
        "(the baseline stays float32 trainer.predict)",
    )
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--max-wait-ms", type=float, default=0.0)
    parser.add_argument("--train-examples", type=int, default=512)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--timeout", type=float, default=600, help="Seconds allowed per client count.")
    parser.add_argument("--work-dir", help="Default: a temporary directory.")
    parser.add_argument(
        "--baseline-checkout",
        help="An older checkout of this repository whose trainer.serve to measure against this tree's (float32).",
    )
    parser.add_argument("--rounds", type=int, default=1, help="With --baseline-checkout: ABBA rounds of both servers.")
    args = parser.parse_args()
    work = args.work_dir or tempfile.mkdtemp(prefix="bench-serve-")
    os.makedirs(work, exist_ok=True)
    data = prepare_data(work)
    model_dir = args.model_dir or trained_model(data, args, work)
    texts = read_texts(data["eval"], data["text_column"], args.texts)
    texts_csv = os.path.join(work, "texts.csv")
    with open(texts_csv, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["text"]] + [[t] for t in texts])
    log(f"trainer.predict on {len(texts)} texts")
    cli_rate = run_predict(model_dir, {"eval": texts_csv, "text_column": "text"}, work)["examples_per_second"]
    log("predict_texts after a warm-up call (the baseline)")
    baseline = warm_baseline(model_dir, texts_csv)
    rows = [
        {
            "setup": "trainer.predict CLI (batch 128, incl. first call)",
            "examples_per_second": cli_rate,
            "share": cli_rate / baseline,
        },
        {"setup": "trainer.predict's predict_texts, warmed (baseline)", "examples_per_second": baseline, "share": 1.0},
    ]
    for precision in args.precisions.split(","):
        rates = serve_rates(
            model_dir,
            work,
            texts,
            precision,
            list(map(int, args.clients.split(","))),
            args.instances_per_request,
            args.max_batch_size,
            args.max_wait_ms,
            args.timeout,
        )
        rows += [
            {
                "setup": f"trainer.serve {precision}, {clients} client(s)",
                "precision": precision,
                **result,
                "share": result["examples_per_second"] / baseline,
            }
            for clients, result in rates.items()
        ]
    clients = list(map(int, args.clients.split(",")))
    if args.baseline_checkout:
        rows += against_checkout(model_dir, work, texts, clients, args)
    print_and_publish(rows, args, len(texts))


def against_checkout(model_dir: str, work: str, texts: list, clients: list, args) -> list:
    """Rows of this tree's float32 server against --baseline-checkout's: mean examples/s of each
    over --rounds ABBA rounds, and their ratio per client count."""
    root = os.path.abspath(args.baseline_checkout)
    if not os.path.isfile(os.path.join(root, "trainer", "serve.py")):
        raise SystemExit(f"error: --baseline-checkout: {root} holds no trainer/serve.py")
    rates = {"baseline": [], "this tree": []}
    for _ in range(args.rounds):
        for name in ("baseline", "this tree", "this tree", "baseline"):
            log(f"A/B round: trainer.serve of {name}")
            # the same flags for both: float32 (the default) and no access line per request
            rates[name].append(
                serve_rates(
                    model_dir,
                    work,
                    texts,
                    "float32",
                    clients,
                    args.instances_per_request,
                    args.max_batch_size,
                    args.max_wait_ms,
                    args.timeout,
                    root if name == "baseline" else ROOT,
                    ["--no-access-log"],
                )
            )
    mean = lambda name, count: float(np.mean([r[count]["examples_per_second"] for r in rates[name]]))  # noqa: E731
    return [
        {
            "setup": f"A/B float32, {count} client(s): this tree vs {os.path.basename(root)}",
            "examples_per_second": mean("this tree", count),
            "share": mean("this tree", count) / mean("baseline", count),
        }
        for count in clients
    ]


def print_and_publish(rows, args, texts):
    columns = [
        ("requests/s", "requests_per_second", ".1f"),
        ("ex/s", "examples_per_second", ".1f"),
        ("p50 ms", "p50_ms", ".1f"),
        ("p99 ms", "p99_ms", ".1f"),
        ("share", "share", ".0%"),
    ]
    info = machine()
    with printed() as text:
        print(
            f"\nbench/serve.py: {texts} texts, {args.instances_per_request} per request, micro-batches of up to "
            f"{args.max_batch_size} within {args.max_wait_ms:g} ms; {info['cpus']} CPUs ({info['cpu']}, "
            f"native {info['native']})"
        )
        print(
            table(
                [[r["setup"]] + [fmt(r.get(key), spec) for _, key, spec in columns] for r in rows],
                ["setup"] + [name for name, _, _ in columns],
            )
        )
        print("share: of the warmed predict_texts' ex/s; A/B rows: of the baseline checkout's server's")
        last = [r for r in rows if r.get("precision") == args.precisions.split(",")[0]][-1]
        print(
            f"target: {TARGET_SHARE:.0%} of trainer.predict's ex/s at the highest client count; "
            f"measured {last['share']:.0%} ({'met' if last['share'] >= TARGET_SHARE else 'NOT met'})"
        )
    publish(
        "serve",
        {"machine": info, "model_dir": os.path.abspath(args.model_dir) if args.model_dir else None, "rows": rows},
        text.getvalue(),
    )


if __name__ == "__main__":
    main()
