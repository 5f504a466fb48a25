"""trainer.serve under load: start a server from a source tree, and measure requests/s,
examples/s and latency percentiles at each count of concurrent clients. Shared by bench/serve.py
and bench/run.py's precision table (and bench/explain_latency.py's server)."""

import asyncio
import csv
import os
import socket
import subprocess
import sys
import time

import httpx
import numpy as np
from common import ROOT, log


def read_texts(path: str, column: str, count: int) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return [row[column] for _, row in zip(range(count), csv.DictReader(f))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_flags(copy: str) -> list:
    """trainer.predict's and trainer.serve's flags that load one copy of a model dir (variants'
    names: float32, int8, bfloat16 on TensorFlow; onnx, onnx-int8 on ONNX Runtime)."""
    from trainer.serving import variants

    runtime, precision = next(pair for pair, name in variants.COPIES.items() if name == copy)
    return ["--runtime", runtime, "--precision", precision]


def start_server(
    model_dir: str,
    work: str,
    precision: str = "float32",
    max_batch_size: int = 64,
    max_wait_ms: float = 0.0,
    root: str = ROOT,
    flags=None,
):
    """trainer.serve from the source tree `root`: this one, or an older checkout (a baseline,
    run without the flags it predates: its float32 model, no access lines; `flags` overrides
    that). The working directory is `root` too: `python -m` puts it first on sys.path, before
    PYTHONPATH."""
    port = free_port()
    log_file = open(os.path.join(work, f"serve-{precision}{'' if root == ROOT else '-baseline'}.log"), "w")
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if flags is None:
        flags = [*copy_flags(precision), "--no-access-log"] if root == ROOT else []
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainer.serve",
            "--model-dir",
            model_dir,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--max-batch-size",
            str(max_batch_size),
            "--max-wait-ms",
            str(max_wait_ms),
            *flags,
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=root,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return process, port
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise SystemExit(f"the server did not become ready; see {log_file.name}")


def serve_rates(
    model_dir: str,
    work: str,
    texts: list,
    precision: str = "float32",
    clients=(1, 4, 16),
    per_request: int = 1,
    max_batch_size: int = 64,
    max_wait_ms: float = 0.0,
    timeout: float = 600,
    root: str = ROOT,
    flags=None,
) -> dict:
    """{clients: load()'s figures} of one trainer.serve process on `precision`, warmed first."""
    requests = [texts[i : i + per_request] for i in range(0, len(texts), per_request)]
    server, port = start_server(model_dir, work, precision, max_batch_size, max_wait_ms, root, flags)
    out = {}
    try:
        asyncio.run(load(port, requests[:32], 4, timeout))  # warm connections and the server
        for count in clients:
            log(f"trainer.serve {precision}: {count} client(s), {len(requests)} requests of {per_request} text(s)")
            out[count] = asyncio.run(load(port, requests, count, timeout))
    finally:
        server.terminate()
        server.wait(timeout=60)
    return out


async def load(port: int, requests: list, clients: int, timeout: float) -> dict:
    """`clients` concurrent clients send `requests` (lists of texts) until none is left."""
    queue = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    latencies = []

    async def client(http):
        while not queue.empty():
            texts = queue.get_nowait()
            start = time.perf_counter()
            response = await http.post(f"http://127.0.0.1:{port}/predict", json={"instances": texts})
            latencies.append(time.perf_counter() - start)
            if response.status_code != 200 or len(response.json()["predictions"]) != len(texts):
                raise SystemExit(f"bad answer ({response.status_code}): {response.text[:200]}")

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as http:
        start = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(client(http) for _ in range(clients))), timeout)
        seconds = time.perf_counter() - start
    examples = sum(len(r) for r in requests)
    return {
        "requests_per_second": len(requests) / seconds,
        "examples_per_second": examples / seconds,
        "p50_ms": 1000 * float(np.percentile(latencies, 50)),
        "p99_ms": 1000 * float(np.percentile(latencies, 99)),
    }
