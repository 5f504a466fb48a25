"""What `{"parameters": {"explain": true}}` costs a trainer.serve request, against the same
request without it, on one model and one server process.

    python bench/explain_latency.py [--model-dir bench/work/explain/model] [--requests 20] [--publish]

The model is bench/explain.py's (the default encoder fine-tuned on SST-2) unless --model-dir
names another; the texts are SST-2 dev sentences of median length, one per request, and
batches of 8. The server computes in float32 (--precision float32), as explanations do. The
first explained request, which loads the explain function, is timed apart; the rest are
medians over --requests requests, one at a time. Traffic goes to 127.0.0.1 only.
"""

import argparse
import os
import statistics
import time

import httpx
from common import WORK, add_publish_flag, machine, printed, publish, read_sst2_tsv, table
from explain import SST2
from server_load import start_server


def timed(url: str, payload: dict) -> float:
    start = time.perf_counter()
    response = httpx.post(url, json=payload, timeout=300)
    response.raise_for_status()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=os.path.join(WORK, "explain", "model"))
    parser.add_argument("--requests", type=int, default=20)
    add_publish_flag(parser)
    args = parser.parse_args()
    work = os.path.join(WORK, "explain_latency")
    os.makedirs(work, exist_ok=True)
    texts = sorted((text for text, _ in read_sst2_tsv(os.path.join(SST2, "dev.tsv"))), key=len)
    median = texts[len(texts) // 2]
    batch = texts[len(texts) // 2 - 4 : len(texts) // 2 + 4]
    process, port = start_server(args.model_dir, work)
    url = f"http://127.0.0.1:{port}/predict"
    try:
        first = timed(url, {"instances": [median], "parameters": {"explain": True}})
        rows = []
        for name, instances in (("1 text", [median]), ("8 texts", batch)):
            for explain in (False, True):
                payload = {"instances": instances, **({"parameters": {"explain": True}} if explain else {})}
                seconds = [timed(url, payload) for _ in range(args.requests)]
                rows.append(
                    {
                        "request": name,
                        "explain": explain,
                        "median_ms": 1000 * statistics.median(seconds),
                        "max_ms": 1000 * max(seconds),
                    }
                )
    finally:
        process.kill()
        process.wait()
    info = machine()
    with printed() as text:
        print(
            f"\nbench/explain_latency.py: {info['cpus']} CPUs ({info['cpu']}, native {info['native']}); "
            f"{args.model_dir}, float32, median text {len(median.split())} words"
        )
        print(f"first explained request (loads the explain function): {1000 * first:.0f} ms\n")
        print(
            table(
                [
                    [r["request"], "yes" if r["explain"] else "no", f"{r['median_ms']:.0f}", f"{r['max_ms']:.0f}"]
                    for r in rows
                ],
                ["request", "explain", "median ms", "max ms"],
            )
        )
    if args.publish:
        publish("explain_latency", {"machine": info, "first_explained_ms": 1000 * first, "rows": rows}, text.getvalue())


if __name__ == "__main__":
    main()
