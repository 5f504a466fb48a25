"""Scale benchmark: time to the first training step, steady throughput and peak RSS at 100k-10M rows.

    python bench/scale.py                      # 100k, 1M and 10M rows (10M: about 1 GB of CSV)
    python bench/scale.py --sizes 100k,1m      # a subset
    python bench/scale.py --sizes 100k --steady-seconds 60 --work /tmp/vbt-scale

Training files are TweetEval tweets (../shared/data/tweeteval, test_*) with their words shuffled
(seeded), as CSV (text,label; labels negative/neutral/positive): every row differs from every other,
so nothing the trainer could deduplicate or cache by text makes a large file cheaper. They are
generated once into the work dir and reused. Every size validates on the same 2,000 TweetEval
val_* tweets, so validation does not grow with the training file.

Each size is one real `python -m trainer.task --epochs 1` job in its own process group, alone on
the machine (run nothing else meanwhile). Its stdout is read as it arrives: the first progress
line (with --log-every-seconds 1 it is the end of step 1, which includes graph tracing) gives the
seconds to the first step counted from process start; progress lines over --steady-seconds from
the second one give the steady examples/s. The RSS of the process tree is summed every 0.2 s
(psutil when installed, else /proc). Then the job is stopped: it need not finish its epoch.
"""

import argparse
import datetime
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
from common import fmt, machine, printed, publish, table

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TWEETEVAL = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "tweeteval"))
LABEL_NAMES = ("negative", "neutral", "positive")
SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
PROGRESS = re.compile(r"epoch \d+/\d+  step (\d+)/\d+  ")
BATCH = re.compile(r"batch (\d+) global")
SAMPLE_SECONDS = 0.2


def log(message):
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", flush=True)


def read_lines(path):
    # Split on '\n' only: tweets may contain other Unicode line separators.
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


# ---------------------------------------------------------------- data


def word_table(texts):
    """Every text's word ids (whitespace-split) end to end, each text's start and length, and
    the vocabulary, CSV-escaped for a quoted field."""
    vocabulary, flat, lengths = {}, [], []
    for text in texts:
        ids = [vocabulary.setdefault(word, len(vocabulary)) for word in text.split()]
        flat.extend(ids)
        lengths.append(len(ids))
    lengths = np.array(lengths, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    words = np.array([w.replace('"', '""') for w in vocabulary], dtype=object)
    return np.array(flat, dtype=np.int64), starts, lengths, words


def row_hashes(flat_ids, starts, lengths):
    """A 64-bit polynomial hash of each row's word-id sequence: equal rows hash equal."""
    position = np.arange(len(flat_ids)) - np.repeat(starts, lengths)
    powers = np.cumprod(np.full(int(lengths.max()) + 1, 0x100000001B3, dtype=np.uint64))
    terms = (flat_ids.astype(np.uint64) + np.uint64(1)) * powers[position]
    return np.add.reduceat(terms, starts) ^ lengths.astype(np.uint64)


def shuffled_rows(table, count, rng):
    """`count` random source texts: their indices, and their word ids, each text's in a random
    order, end to end (with each row's start and length)."""
    flat, source_starts, source_lengths = table
    picked = rng.integers(0, len(source_lengths), count)
    lengths = source_lengths[picked]
    starts = np.cumsum(lengths) - lengths
    gathered = flat[np.repeat(source_starts[picked] - starts, lengths) + np.arange(lengths.sum())]
    # Row number plus a random fraction: sorting keeps rows in place and shuffles within each.
    order = np.argsort(np.repeat(np.arange(count), lengths) + rng.random(len(gathered)))
    return picked, gathered[order], starts, lengths


def generate(texts, labels, rows, seed, chunk_rows=250_000, max_rounds=100):
    """Yields chunks of (texts, label ids): rows drawn uniformly from `texts` with their words
    shuffled, no two alike across all chunks (a row equal to an earlier one is drawn again,
    from a new random source), each carrying its source's label. Texts come CSV-escaped (quotes
    doubled) for write_csv."""
    flat, starts, lengths, words = word_table(texts)
    keep = lengths > 0
    table = (flat, starts[keep], lengths[keep])
    labels = np.asarray(labels)[keep]
    rng = np.random.default_rng(seed)
    seen = np.zeros(0, dtype=np.uint64)  # sorted hashes of every row generated so far
    for first in range(0, rows, chunk_rows):
        out = [None] * min(chunk_rows, rows - first)
        label_ids = np.zeros(len(out), dtype=np.int64)
        todo = np.arange(len(out))
        for _ in range(max_rounds):
            picked, row_words, row_starts, row_lengths = shuffled_rows(table, len(todo), rng)
            hashes = row_hashes(row_words, row_starts, row_lengths)
            fresh = _unseen(hashes, seen)
            tokens = words[row_words].tolist()
            for k, at, n in zip(todo[fresh].tolist(), row_starts[fresh].tolist(), row_lengths[fresh].tolist()):
                out[k] = " ".join(tokens[at : at + n])
            label_ids[todo[fresh]] = labels[picked[fresh]]
            seen = np.sort(np.concatenate([seen, np.sort(hashes[fresh])]), kind="stable")
            todo = todo[~fresh]
            if not len(todo):
                break
        else:
            raise ValueError(f"could not draw {rows} distinct rows from {len(labels)} texts")
        yield out, label_ids


def _unseen(hashes, seen):
    """True for the first occurrence of each hash that is not in the sorted `seen`."""
    first = np.zeros(len(hashes), dtype=bool)
    first[np.unique(hashes, return_index=True)[1]] = True
    where = np.minimum(np.searchsorted(seen, hashes), max(len(seen) - 1, 0))
    in_seen = (seen[where] == hashes) if len(seen) else np.zeros(len(hashes), dtype=bool)
    return first & ~in_seen


def write_csv(path, chunks):
    """text,label CSV (text always quoted) from (texts, label ids) chunks; atomic."""
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8", newline="") as f:
        f.write("text,label\n")
        for texts, label_ids in chunks:
            f.write("".join(f'"{t}",{LABEL_NAMES[i]}\n' for t, i in zip(texts, label_ids)))
    os.replace(partial, path)
    return path


def prepare_data(work, sizes, seed):
    """The validation file and one training file per size, generated unless already there."""
    if not os.path.isdir(TWEETEVAL):
        sys.exit(f"error: no TweetEval in {TWEETEVAL} (the scale benchmark needs its tweets)")
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    validation = os.path.join(data, "validation.csv")
    if not os.path.exists(validation):
        texts = read_lines(os.path.join(TWEETEVAL, "val_text.txt"))
        ids = [int(x) for x in read_lines(os.path.join(TWEETEVAL, "val_labels.txt"))]
        write_csv(validation, [([t.replace('"', '""') for t in texts], ids)])
    texts = read_lines(os.path.join(TWEETEVAL, "test_text.txt"))
    labels = [int(x) for x in read_lines(os.path.join(TWEETEVAL, "test_labels.txt"))]
    files = {}
    for size in sizes:
        path = os.path.join(data, f"train-{size}-seed{seed}.csv")
        if not os.path.exists(path):
            start = time.perf_counter()
            log(f"writing {SIZES[size]:,} shuffled-word rows to {path}")
            write_csv(path, generate(texts, labels, SIZES[size], seed))
            log(f"  {os.path.getsize(path) / 2**20:,.0f} MiB in {time.perf_counter() - start:.0f}s")
        files[size] = path
    return validation, files


# ---------------------------------------------------------------- measuring


def tree_rss(pid):
    """Bytes resident in `pid` and all its descendants (0 once it is gone)."""
    try:
        import psutil
    except ImportError:
        return _proc_tree_rss(pid)
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def _proc_tree_rss(pid):
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, grew = {pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(_status_kib(p, "VmRSS") for p in tree) * 1024


def _status_kib(pid, field):
    """A `kB` field of /proc/PID/status (VmRSS, VmHWM), 0 when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pump(stream, lines, copy):
    for line in iter(stream.readline, ""):
        lines.put((time.monotonic(), line))
        copy.write(line)
        copy.flush()
    lines.put((time.monotonic(), None))


def stop(process, grace=30.0):
    """SIGTERM to the job's process group, SIGKILL if it is still there after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            continue


def run_size(size, train_file, validation, work, args, extra):
    """One trainer job on `train_file`: first-step seconds, steady ex/s, peak RSS; then stopped."""
    job_dir = os.path.join(work, "jobs", size)
    shutil.rmtree(job_dir, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "trainer.task",
        "--training-file",
        train_file,
        "--validation-file",
        validation,
        "--job-dir",
        job_dir,
        "--epochs",
        "1",
        "--log-every-seconds",
        "1",
        *extra,
    ]
    stdout_path, stderr_path = (os.path.join(work, f"{size}.{s}.log") for s in ("stdout", "stderr"))
    with open(stdout_path, "w") as copy, open(stderr_path, "w") as errors:
        start = time.monotonic()
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            errors="replace",
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        lines = queue.Queue()
        reader = threading.Thread(target=_pump, args=(process.stdout, lines, copy), daemon=True)
        reader.start()
        try:
            found = _watch(process, lines, start, args.steady_seconds, args.max_seconds)
        finally:
            stop(process)
            reader.join(10)
    if found["timed_out"]:
        sys.exit(
            f"error: the {size} job had no steady window after --max-seconds "
            f"{args.max_seconds:.0f} (stdout {stdout_path})"
        )
    if not found["window"] or found["batch"] is None:
        tail = "".join(read_lines_tail(stderr_path, 15))
        sys.exit(
            f"error: the {size} job exited with {process.returncode} before training "
            f"(stdout {stdout_path}); last lines of its stderr:\n{tail}"
        )
    window = found["window"]
    steps = window[-1][1] - window[0][1]
    seconds = window[-1][0] - window[0][0]
    return {
        "rows": SIZES[size],
        "file_mib": os.path.getsize(train_file) / 2**20,
        "first_step_seconds": found["first"][0] - start,
        "first_progress_step": found["first"][1],
        "steady_examples_per_second": steps * found["batch"] / seconds if seconds else None,
        "steady_steps": steps,
        "steady_seconds": seconds,
        "peak_rss_gib": found["peak_rss"] / 2**30,
        "peak_vmhwm_gib": found["vmhwm_kib"] / 2**20,
        "command": command,
    }


def _watch(process, lines, start, steady_seconds, max_seconds):
    """Samples RSS and reads log lines until the steady window is full, the job ends or
    `max_seconds` have passed."""
    found = {"batch": None, "first": None, "window": [], "peak_rss": 0, "vmhwm_kib": 0, "timed_out": False}
    while time.monotonic() - start < max_seconds:
        found["peak_rss"] = max(found["peak_rss"], tree_rss(process.pid))
        found["vmhwm_kib"] = max(found["vmhwm_kib"], _status_kib(process.pid, "VmHWM"))
        deadline = time.monotonic() + SAMPLE_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            try:
                at, line = lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                process.wait()
                return found
            if _read(found, at, line, start, steady_seconds):
                return found
    found["timed_out"] = True
    return found


def _read(found, at, line, start, steady_seconds):
    """Notes what a log line arriving at `at` tells; True once the steady window is full."""
    if found["batch"] is None and (m := BATCH.search(line)):
        found["batch"] = int(m.group(1))
    if not (m := PROGRESS.search(line)):
        return False
    step = (at, int(m.group(1)))
    if found["first"] is None:
        found["first"] = step
        log(f"  first step after {at - start:.1f}s (progress line of step {step[1]})")
        return False
    found["window"].append(step)
    return at - found["window"][0][0] >= steady_seconds


def read_lines_tail(path, count):
    with open(path, errors="replace") as f:
        return f.readlines()[-count:]


# ---------------------------------------------------------------- report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100k,1m,10m", help="comma-separated, of " + ", ".join(SIZES))
    parser.add_argument("--work", default="/tmp/vbt-scale", help="data files, job dirs, logs, results")
    parser.add_argument(
        "--steady-seconds",
        type=float,
        default=120.0,
        help="length of the throughput window, from the second progress line",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=3600.0,
        help="stop a job that has not filled its steady window by then (an error)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the word shuffling")
    parser.add_argument(
        "trainer_flags", nargs=argparse.REMAINDER, help="after --: more trainer.task flags, the same for every size"
    )
    args = parser.parse_args()
    sizes = [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    if unknown := [s for s in sizes if s not in SIZES]:
        parser.error(f"--sizes: unknown {', '.join(unknown)} (use {', '.join(SIZES)})")
    extra = [f for f in args.trainer_flags if f != "--"]
    work = os.path.abspath(args.work)
    validation, files = prepare_data(work, sizes, args.seed)
    results = {
        "machine": machine(),
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "steady_seconds": args.steady_seconds,
        "trainer_flags": extra,
        "sizes": {},
    }
    for size in sizes:
        log(f"{size}: training on {files[size]}")
        results["sizes"][size] = r = run_size(size, files[size], validation, work, args, extra)
        log(f"  {r['steady_examples_per_second'] or 0:.1f} ex/s steady, peak RSS {r['peak_rss_gib']:.2f} GiB")
    base = results["sizes"].get("100k")
    rows = [
        [
            f"{r['rows']:,}",
            f"{r['file_mib']:.0f}",
            f"{r['first_step_seconds']:.1f}",
            fmt(r["steady_examples_per_second"], ".1f"),
            f"{r['peak_rss_gib']:.2f}",
            fmt(r["peak_rss_gib"] - base["peak_rss_gib"] if base else None, "+.2f"),
        ]
        for r in results["sizes"].values()
    ]
    with printed() as text:
        print(
            f"\nbench/scale.py: {results['machine']['cpus']} CPUs ({results['machine']['cpu']}, native "
            f"{results['machine']['native']}); steady window {args.steady_seconds:.0f} s"
            + (f"; trainer flags {' '.join(extra)}" if extra else "")
        )
        print(table(rows, ["rows", "file MiB", "s to first step", "steady ex/s", "peak RSS GiB", "RSS - 100k GiB"]))
    publish("scale", results, text.getvalue())


if __name__ == "__main__":
    main()
