"""Benchmark: our trainer against itself and the tutorial pipeline, in one run, on this machine.

    python bench/run.py                    # everything
    python bench/run.py --quick            # fewer configurations, smaller subsets (it prints how long it took)
    python bench/run.py --prediction-only JOB_DIR/model   # only trainer.predict vs the seed's evaluation

It ends with the figures against the seed, all from the one run: the epoch ratio, our training
ex/s, and the prediction ratio (`python -m trainer.predict` ex/s over the validation file vs the
seed's evaluation loop over the same file), for float32 and for each faster copy the model dir
holds (`--precision int8`, `--precision bfloat16`, and the ONNX copies: `--runtime onnx`), with
trainer.serve's ex/s at 1, 4 and 16 clients for each. The printed tables and the JSON go to
bench/results/DATE-MACHINE-run.json (bench/common.py: publish); scratch files to bench/work/.

Every configuration is a real `python -m trainer.task` job in its own process (so peak RSS is
its own), reading metrics.json afterwards. The baseline is measured in the same run: our own
float32, fixed-padding configuration always, and the seed reference
(../shared/bench/seed_torch.py, PyTorch + transformers) when its virtualenv exists
(see ../shared/bench/README.md; --seed-python points at it). Nothing else should run meanwhile.

Data: TweetEval from ../shared/data when present (train on the first 10,000 lines of test_*,
validate on val_*), else the sample posts shipped in the package.
"""

import argparse
import csv
import datetime
import json
import os
import re
import subprocess
import sys
import time

from common import ROOT, WORK, fmt, log, machine, printed, publish, table
from server_load import copy_flags, read_texts, serve_rates

SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
SEED_SCRIPT = os.path.join(SHARED, "bench", "seed_torch.py")
DEFAULT_SEED_PYTHON = "/tmp/seed-venv/bin/python"
LABELS = "negative,neutral,positive"


def prepare_data(work: str) -> dict:
    """CSV files (text,label) for the benchmark splits; TweetEval when it is here."""
    tweeteval = os.path.join(SHARED, "data", "tweeteval")
    if not os.path.isdir(tweeteval):
        sample = os.path.join(ROOT, "trainer", "data", "sample_data")
        log("TweetEval not found: using the sample posts shipped in the package")
        return {
            "name": "sample posts",
            "train": f"{sample}/train.csv",
            "eval": f"{sample}/eval.csv",
            "text_column": "bodyText",
            "label_column": "sentiment",
        }
    out = os.path.join(work, "data")
    if not os.path.exists(os.path.join(out, "tweeteval_train.csv")):
        subprocess.run([sys.executable, os.path.join(SHARED, "bench", "prepare_data.py"), "--out", out], check=True)
    return {
        "name": "TweetEval (train: first 10,000 of test_*, validate: val_*)",
        "train": f"{out}/tweeteval_train.csv",
        "eval": f"{out}/tweeteval_eval.csv",
        "holdout": f"{out}/tweeteval_holdout.csv",
        "text_column": "text",
        "label_column": "label",
    }


def head_csv(path: str, rows: int, out: str) -> str:
    """The first `rows` data rows of a CSV (the same prefix for every configuration)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        kept = [next(reader)] + [row for _, row in zip(range(rows), reader)]
    with open(out, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(kept)
    return out


def run_measured(command, log_path, env=None):
    """Runs a command to completion; returns (seconds, peak RSS MiB of that process tree)."""
    start = time.perf_counter()
    with open(log_path, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed; see {log_path}")
    return seconds, usage.ru_maxrss / 1024.0


# name, description, trainer flags, training rows
def configurations(quick: bool, hub_dir: str):
    subset = 800 if quick else 1600
    fixed128 = ["--sequence-padding", "fixed", "--max-seq-length", "128"]
    everything = ["--train-word-embeddings"]
    configs = [
        (
            "fp32-fixed128",
            "float32, padded to 128, all weights trained (our baseline)",
            ["--mixed-precision", "off", *fixed128, *everything],
            subset,
        ),
        (
            "bf16-fixed128",
            "bfloat16, padded to 128, all weights trained",
            ["--mixed-precision", "bfloat16", *fixed128, *everything],
            subset,
        ),
        (
            "fp32-bucket-trainemb",
            "float32, length buckets, all weights trained",
            ["--mixed-precision", "off", *everything],
            subset,
        ),
        ("fp32-bucket", "float32, length buckets, word embeddings frozen", ["--mixed-precision", "off"], subset),
        ("default", "defaults: bfloat16, length buckets, word embeddings frozen", [], subset),
    ]
    if not quick:
        configs += [
            ("default-train-emb", "defaults, word embeddings trained too", everything, subset),
            ("default-xla", "defaults + XLA", ["--jit-compile", "on"], subset),
            (
                "default-b64",
                "defaults, batch 64, learning rate 2e-4",
                ["--batch-size", "64", "--learning-rate", "2e-4"],
                subset,
            ),
            (
                "hub-fp32-fixed128",
                "hub.KerasLayer backend, float32, padded to 128",
                ["--encoder", hub_dir, "--encoder-backend", "hub", "--mixed-precision", "off", *fixed128],
                subset,
            ),
            (
                "hub-bf16-fixed128",
                "hub.KerasLayer backend, grappler bfloat16 rewrite, padded to 128",
                ["--encoder", hub_dir, "--encoder-backend", "hub", "--mixed-precision", "bfloat16", *fixed128],
                subset,
            ),
        ]
    return configs


def run_ours(name, flags, data, train_file, work, validation_file=None):
    job_dir = os.path.join(work, "jobs", name)
    command = [
        sys.executable,
        "-m",
        "trainer.task",
        "--training-file",
        train_file,
        "--validation-file",
        validation_file or data["eval"],
        "--text-column",
        data["text_column"],
        "--label-column",
        data["label_column"],
        "--epochs",
        "1",
        "--job-dir",
        job_dir,
        "--overwrite",
        "--log-every-seconds",
        "60",
        *flags,
    ]
    if data["label_column"] == "label":
        command += ["--label-type", "index", "--label-names", LABELS]
    seconds, rss = run_measured(command, os.path.join(work, f"{name}.log"))
    with open(os.path.join(job_dir, "metrics.json")) as f:
        metrics = json.load(f)
    return {
        "job_seconds": seconds,
        "peak_rss_mib": rss,
        "train_examples": metrics["dataset_sizes"]["train"],
        "epoch_seconds": metrics["durations"]["train"],
        "train_examples_per_second": metrics["train_examples_per_second"],
        "train_tokens_per_second": metrics["train_tokens_per_second"],
        "val_macro_recall": metrics["validation"]["macro_recall"],
        "val_accuracy": metrics["validation"]["accuracy"],
        "precision": metrics["device"]["precision"],
        "jit_compile": metrics["device"]["jit_compile"],
        "model_dir": os.path.join(job_dir, "model"),
    }


def run_predict(model_dir, data, work, precision="float32", times=1):
    """`python -m trainer.predict` over the validation file, the one the seed's evaluation loop
    runs over; its rows/s (reading to writing, the model loaded) from its last line, and the
    whole command's seconds (start-up included). precision None: the defaults (--runtime auto
    --precision auto: the fastest checked copy). `times`: run that often, the median run's
    figures kept (a command of 2-3 s varies by a tenth of a second or two from run to run),
    every run's seconds in `job_seconds_each`."""
    output = os.path.join(work, f"predictions-{precision or 'default'}.csv")
    command = [
        sys.executable,
        "-m",
        "trainer.predict",
        "--model-dir",
        model_dir,
        "--input",
        data["eval"],
        "--output",
        output,
        "--overwrite",
        "--text-column",
        data["text_column"],
        *(copy_flags(precision) if precision else []),
    ]
    log_path = os.path.join(work, f"predict-{precision or 'default'}.log")
    runs = []
    for _ in range(times):
        seconds, rss = run_measured(command, log_path)
        with open(log_path) as f:
            rows, rate = re.findall(r"predicted (\d+) rows in \S+ \(([\d,.]+) rows/s\)", f.read())[-1]
        rate = float(rate.replace(",", ""))
        runs.append(
            {
                "rows": int(rows),
                "seconds": int(rows) / rate,
                "examples_per_second": rate,
                "job_seconds": seconds,
                "peak_rss_mib": rss,
            }
        )
    median = sorted(runs, key=lambda run: run["job_seconds"])[len(runs) // 2]
    return {**median, "job_seconds_each": [run["job_seconds"] for run in runs]}


def run_seed(seed_python, data, work, train_rows=None):
    """The seed reference: one epoch (over `train_rows` only, when given: its evaluation loop's
    speed does not depend on its weights), then its evaluation loop over the validation file."""
    result = os.path.join(work, "seed-result.json")
    command = [
        seed_python,
        SEED_SCRIPT,
        "train",
        "--model",
        "minilm",
        "--n-classes",
        "3",
        "--train-csv",
        data["train"],
        "--eval-csv",
        f"val={data['eval']}",
        "--batch-size",
        "32",
        "--lr",
        "1e-4",
        "--epochs",
        "1",
        "--out",
        result,
    ]
    if train_rows:
        command += ["--max-train-examples", str(train_rows)]
    seconds, rss = run_measured(command, os.path.join(work, "seed.log"))
    with open(result) as f:
        r = json.load(f)
    return {
        "job_seconds": seconds,
        "peak_rss_mib": r["peak_rss_mib"],
        "train_examples": r["train_examples_used"],
        "epoch_seconds": r["train_time_s"],
        "train_examples_per_second": r["train_ex_per_s"],
        "val_macro_recall": r["eval"]["val"]["macro_recall"],
        "val_accuracy": r["eval"]["val"]["accuracy"],
        "eval_examples_per_second": r["eval"]["val"]["eval_ex_per_s"],
    }


def run_precisions(model_dir, data, work, float32_predict, baseline_root=None, serve_texts=600, clients=(1, 4, 16)):
    """Each precision the model dir holds: trainer.predict over the validation file (float32's
    is the run's `float32_predict`), trainer.serve at each client count (one text per request,
    serve_texts validation tweets), the model's size, and the check its copy passed when the run
    wrote it (precisions.json)."""
    from trainer.serving.variants import available, float32_size

    manifest = os.path.join(model_dir, "precisions.json")
    checks = json.load(open(manifest)) if os.path.exists(manifest) else {}
    texts = read_texts(data["eval"], data["text_column"], serve_texts)
    out = {}
    for precision in available(model_dir):
        log(f"{precision}: trainer.predict, then trainer.serve at {clients} clients")
        check = checks.get(precision, {})
        out[precision] = {
            "predict": (float32_predict if precision == "float32" else run_predict(model_dir, data, work, precision)),
            "serve": serve_rates(model_dir, work, texts, precision, clients),
            "size_bytes": check.get("size_bytes") or float32_size(model_dir),
            "check": check,
        }
    if baseline_root:
        log(f"baseline server: trainer.serve from {baseline_root}, float32")
        commit = (
            subprocess.run(
                ["git", "-C", baseline_root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
            or baseline_root
        )
        out["baseline"] = {
            "root": baseline_root,
            "commit": commit,
            "serve": serve_rates(model_dir, work, texts, "float32", clients, root=baseline_root),
        }
    return out


def export_hub_encoder(work):
    out = os.path.join(work, "minilm-hub")
    if not os.path.exists(os.path.join(out, "saved_model.pb")):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer.export_encoder",
                "--encoder",
                "minilm-l6-h384-uncased",
                "--output-dir",
                out,
            ],
            check=True,
        )
    return out


def print_headline(results):
    """The three figures against the seed, all from this run: epoch time, training ex/s and
    prediction ex/s (trainer.predict vs the seed's evaluation loop, over the same file)."""
    ours, seed = results["full_epoch"].get("ours"), results["full_epoch"].get("seed")
    predict = results.get("predict")
    print("\nAgainst the seed reference (PyTorch tutorial pipeline), measured in this run:")
    if ours:
        print(
            f"  training: our epoch {ours['epoch_seconds']:.0f} s, {ours['train_examples_per_second']:.1f} ex/s"
            + (
                f"; the seed's {seed['epoch_seconds']:.0f} s, {seed['train_examples_per_second']:.1f} ex/s: "
                f"epoch ratio {seed['epoch_seconds'] / ours['epoch_seconds']:.2f}x (seed time / ours), "
                f"val macro-recall {ours['val_macro_recall'] - seed['val_macro_recall']:+.3f}"
                if seed
                else ""
            )
        )
    if predict:
        print(
            f"  prediction: trainer.predict {predict['examples_per_second']:.1f} ex/s over {predict['rows']} "
            f"validation rows"
            + (
                f"; the seed's evaluation loop {seed['eval_examples_per_second']:.1f} ex/s: "
                f"prediction ratio {predict['examples_per_second'] / seed['eval_examples_per_second']:.2f}x"
                if seed
                else ""
            )
        )
    default = results.get("predict_default")
    if default and seed:
        print(
            f"  the default trainer.predict (--runtime auto --precision auto): {default['examples_per_second']:.1f} "
            f"ex/s, prediction ratio {default['examples_per_second'] / seed['eval_examples_per_second']:.2f}x; "
            f"the whole command {default['job_seconds']:.2f} s for {default['rows']} rows "
            f"(the median of {len(default['job_seconds_each'])}: "
            f"{min(default['job_seconds_each']):.2f}-{max(default['job_seconds_each']):.2f} s) "
            f"({default['rows'] / default['job_seconds']:.1f} ex/s, start-up included: "
            f"{default['rows'] / default['job_seconds'] / seed['eval_examples_per_second']:.2f}x)"
        )
    for precision, r in results.get("precisions", {}).items():
        if precision in ("float32", "baseline"):
            continue
        rate = r["predict"]["examples_per_second"]
        print(
            f"  fast path: trainer.predict {' '.join(copy_flags(precision))} {rate:.1f} ex/s, "
            f"{rate / predict['examples_per_second']:.2f}x our float32 export"
            + (f"; prediction ratio {rate / seed['eval_examples_per_second']:.2f}x the seed's" if seed else "")
        )
    if not seed:
        print("  (no seed run: ratios need its virtualenv, see ../shared/bench/README.md)")


def prediction_only(args, data, work, results):
    """--prediction-only: trainer.predict on an exported model and the seed's evaluation loop,
    on the same validation file; the seed trains on 64 rows first (its script always trains)."""
    log(f"prediction throughput: trainer.predict on {args.prediction_only}")
    results["predict"] = run_predict(args.prediction_only, data, work)
    results["predict_default"] = run_predict(args.prediction_only, data, work, precision=None, times=5)
    results["precisions"] = run_precisions(
        args.prediction_only, data, work, results["predict"], args.serve_baseline_root
    )
    if os.path.exists(args.seed_python):
        log("the seed reference's evaluation loop (after training on 64 rows)")
        results["full_epoch"]["seed"] = run_seed(args.seed_python, data, work, train_rows=64)
    with printed() as text:
        print_precisions(results)
        print_headline(results)
    publish("run", results, text.getvalue(), part="prediction")


def print_subset(results):
    """The configurations' table and the ratios that isolate one change each."""
    s = results["subset"]
    base = s["fp32-fixed128"]
    rows = [
        [
            name,
            r["description"],
            fmt(r["train_examples_per_second"], ".1f"),
            fmt(r["train_tokens_per_second"], ".0f"),
            fmt(r["train_examples_per_second"] / base["train_examples_per_second"], ".2f") + "x",
            fmt(r["val_macro_recall"], ".3f"),
            fmt(r["peak_rss_mib"], ".0f"),
        ]
        for name, r in s.items()
    ]
    print(
        f"\nTraining throughput (steady state), one epoch over the first "
        f"{base['train_examples']} rows, validated on 500:"
    )
    print(
        table(
            rows, ["config", "what", "train ex/s", "real tok/s", "vs fp32-fixed128", "val macro-recall", "peak RSS MiB"]
        )
    )
    rate = lambda name: s[name]["train_examples_per_second"]  # noqa: E731
    tokens = s["default"]["train_tokens_per_second"] / rate("default")
    print(
        f"\nRatios (same run), one change each:\n"
        f"  length buckets vs padding to 128 (float32, all weights trained): "
        f"{rate('fp32-bucket-trainemb') / rate('fp32-fixed128'):.2f}x ({tokens:.1f} real tokens per example)\n"
        f"  word embeddings frozen vs trained (float32, buckets): "
        f"{rate('fp32-bucket') / rate('fp32-bucket-trainemb'):.2f}x\n"
        f"  bfloat16 vs float32: {rate('bf16-fixed128') / rate('fp32-fixed128'):.2f}x at 128 tokens, "
        f"{rate('default') / rate('fp32-bucket'):.2f}x with buckets\n"
        f"  defaults vs baseline: {rate('default') / rate('fp32-fixed128'):.2f}x"
    )
    if "hub-fp32-fixed128" in s:
        print(
            f"  hub fp32 vs native fp32 {rate('hub-fp32-fixed128') / rate('fp32-fixed128'):.2f}x; "
            f"hub bf16 (rewrite) vs hub fp32 {rate('hub-bf16-fixed128') / rate('hub-fp32-fixed128'):.2f}x"
        )
    if "default-xla" in s:
        print(
            f"  XLA vs defaults {rate('default-xla') / rate('default'):.2f}x; batch 64 vs defaults "
            f"{rate('default-b64') / rate('default'):.2f}x"
        )


def print_precisions(results):
    """Per precision: prediction and serving ex/s, ratios to float32, size, the copy's check."""
    by = results["precisions"]
    base = by["float32"]
    rows = []
    for precision, r in by.items():
        if precision == "baseline":
            rows.append(
                [
                    f"trainer.serve at {r['commit']} (float32)",
                    "-",
                    "-",
                    *[fmt(r["serve"][c]["examples_per_second"], ".1f") for c in sorted(r["serve"])],
                    "-",
                    "-",
                    "-",
                ]
            )
            continue
        check, rate = r["check"], r["predict"]["examples_per_second"]
        rows.append(
            [
                precision,
                fmt(rate, ".1f"),
                fmt(rate / base["predict"]["examples_per_second"], ".2f") + "x",
                *[fmt(r["serve"][c]["examples_per_second"], ".1f") for c in sorted(r["serve"])],
                fmt(r["size_bytes"] / 2**20, ".0f"),
                fmt(100 * check["label_agreement"], ".2f") + "%" if check else "-",
                fmt(check["change_points"], "+.2f") if check else "-",
            ]
        )
    clients = sorted(base["serve"])
    print(
        f"\nPrediction by precision, the full epoch's model (trainer.predict over {base['predict']['rows']} "
        f"validation rows; trainer.serve, one text per request; the copy's check as the run wrote it):"
    )
    print(
        table(
            rows,
            [
                "precision",
                "predict ex/s",
                "vs float32",
                *[f"serve {c} ex/s" for c in clients],
                "MiB",
                "label agreement",
                "accuracy change (points)",
            ],
        )
    )


def print_full_epoch(results):
    full = results["full_epoch"]
    ours, seed = full["ours"], full.get("seed")
    rows = [
        [
            "ours (defaults)",
            fmt(ours["epoch_seconds"], ".0f"),
            fmt(ours["train_examples_per_second"], ".1f"),
            fmt(ours["val_macro_recall"], ".3f"),
            fmt(ours["val_accuracy"], ".3f"),
            fmt(ours["peak_rss_mib"], ".0f"),
        ]
    ]
    if seed:
        rows.append(
            [
                "seed reference (PyTorch)",
                fmt(seed["epoch_seconds"], ".0f"),
                fmt(seed["train_examples_per_second"], ".1f"),
                fmt(seed["val_macro_recall"], ".3f"),
                fmt(seed["val_accuracy"], ".3f"),
                fmt(seed["peak_rss_mib"], ".0f"),
            ]
        )
    print(f"\nOne epoch over {ours['train_examples']} training rows:")
    print(table(rows, ["pipeline", "epoch s", "train ex/s", "val macro-recall", "val accuracy", "peak RSS MiB"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", default=WORK, help="scratch: data, job dirs, logs")
    parser.add_argument(
        "--seed-python",
        default=DEFAULT_SEED_PYTHON,
        help="python of the seed reference's virtualenv (skipped when missing)",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--skip-full-epoch", action="store_true", help="only the subset configurations (no 10,000-example epochs)"
    )
    parser.add_argument(
        "--prediction-only",
        metavar="MODEL_DIR",
        help="only prediction: trainer.predict on this exported model vs the seed's evaluation loop",
    )
    parser.add_argument(
        "--serve-baseline-root",
        metavar="DIR",
        help="also serve the float32 model with trainer.serve from this source tree "
        "(an older checkout: git worktree add DIR COMMIT), as a baseline in "
        "the same run",
    )
    args = parser.parse_args()
    started = time.monotonic()
    work = os.path.abspath(args.work_dir)
    os.makedirs(work, exist_ok=True)
    data = prepare_data(work)
    results = {
        "machine": machine(),
        "data": data["name"],
        "quick": args.quick,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "subset": {},
        "full_epoch": {},
    }
    if args.prediction_only:
        return prediction_only(args, data, work, results)

    hub_dir = None if args.quick else export_hub_encoder(work)
    # Throughput comparisons validate on a slice: validation time is not what they measure.
    subset_validation = head_csv(data["eval"], 500, os.path.join(work, "eval_500.csv"))
    for name, description, flags, rows in configurations(args.quick, hub_dir):
        train_file = head_csv(data["train"], rows, os.path.join(work, f"train_{rows}.csv"))
        log(f"{name}: {description} ({rows} training rows)")
        results["subset"][name] = {
            "description": description,
            "flags": flags,
            **run_ours(name, flags, data, train_file, work, subset_validation),
        }

    if not args.skip_full_epoch:
        log("full epoch: our defaults")
        results["full_epoch"]["ours"] = run_ours("full-default", [], data, data["train"], work)
        log("prediction throughput: trainer.predict on the exported default model")
        results["predict"] = run_predict(results["full_epoch"]["ours"]["model_dir"], data, work)
        results["precisions"] = run_precisions(
            results["full_epoch"]["ours"]["model_dir"], data, work, results["predict"], args.serve_baseline_root
        )
        if os.path.exists(args.seed_python):
            log("full epoch: the seed reference (PyTorch tutorial pipeline)")
            results["full_epoch"]["seed"] = run_seed(args.seed_python, data, work)
        else:
            log(f"seed reference skipped: no {args.seed_python} (see ../shared/bench/README.md)")

    with printed() as text:
        print(
            f"\nbench/run.py{' --quick' if args.quick else ''}: {data['name']}; one process at a time on "
            f"{os.cpu_count()} CPUs ({results['machine']['cpu']}, native {results['machine']['native']}); "
            f"{(time.monotonic() - started) / 60:.0f} minutes."
        )
        print_subset(results)
        if results["full_epoch"]:
            print_full_epoch(results)
            print_precisions(results)
            print_headline(results)
    publish("run", results, text.getvalue())


if __name__ == "__main__":
    main()
