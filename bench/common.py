"""What several benchmarks share: timing rounds, and finishing with a JSON file.

A run whose tables README quotes is published: its JSON, with the text the script printed and the
machine it ran on, goes to bench/results/ under a name that says when and where
(`2026-11-25-epyc-avx512bf16-run.json`), to be committed; tests/bench/test_bench_results.py checks that
every table in README is a verbatim part of one of those files.
"""

import contextlib
import csv
import datetime
import io
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

import trainer.tasks  # noqa: F401  the kinds registered, as every entry point registers them

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # the repository
RESULTS = os.path.join(HERE, "results")
WORK = os.path.join(HERE, "work")  # scratch: data, job dirs, logs (gitignored)
FIGURE = re.compile(r"^[-+]?[\d,.]*\d[\d,.]*[x%]?$|^-$")


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def read_sst2_tsv(path):
    """GLUE SST-2's TSV (sentence, label; no quoting: a sentence may hold a quote) without its header."""
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]


def write_sst2_tsv(path, rows):
    """(sentence, label) rows as SST-2's TSV, which the trainer reads by extension."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        writer.writerow(["sentence", "label"])
        writer.writerows(rows)


def predict_file(model_dir: str, input_path: str, output: str) -> tuple:
    """(trainer.predict's printed lines, its output rows as dicts in the input's order) for
    `input_path` through the float32 export in `model_dir`, replacing the bench's own `output`
    of an earlier run; stops with its stderr if it fails."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.predict",
            "--model-dir",
            model_dir,
            "--input",
            input_path,
            "--output",
            output,
            "--precision",
            "float32",
            "--overwrite",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"error: trainer.predict on {input_path} failed:\n{done.stderr}")
    with open(output, newline="", encoding="utf-8") as f:
        return done.stdout, list(csv.DictReader(f))


def train_once(job: str, flags: list) -> dict:
    """metrics.json of `python -m trainer.task --job-dir job FLAGS`, run only when `job` holds no
    finished run (an unfinished one resumes, on the machine it started on), without the checked
    copies and explanations a benchmark of training does not measure."""
    kept_here(job)
    if not os.path.exists(os.path.join(job, "metrics.json")):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer.task",
                "--job-dir",
                job,
                *flags,
                "--export-bfloat16",
                "off",
                "--export-int8",
                "off",
                "--export-onnx",
                "off",
                "--report-explanations",
                "0",
            ],
            check=True,
            cwd=ROOT,
        )
    return metrics_of(job)


def metrics_of(job: str) -> dict:
    """A finished run's metrics.json."""
    with open(os.path.join(job, "metrics.json")) as f:
        return json.load(f)


def timed(function, rounds: int) -> float:
    """Median seconds of `rounds` calls after one untimed call (tracing, warm-up)."""
    function()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def finish(result: dict, json_path=None, work=None) -> dict:
    """Writes `result` to `json_path` (when given), removes the scratch dir `work`, returns it."""
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    if work:
        shutil.rmtree(work, ignore_errors=True)
    return result


def fmt(value, spec) -> str:
    return "-" if value is None else format(value, spec)


def table(rows, columns) -> str:
    """A plain-text table: figures right-aligned, words left-aligned."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    figures = [all(FIGURE.match(r[i]) for r in rows) for i in range(len(columns))]

    def line(cells):
        return "  ".join(c.rjust(w) if figure else c.ljust(w) for c, w, figure in zip(cells, widths, figures)).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths])] + [line(r) for r in rows])


def cpu_flags(cpuinfo: str) -> set:
    """The flags of /proc/cpuinfo's first processor."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def machine(cpuinfo_path="/proc/cpuinfo") -> dict:
    """What a figure depends on: CPU model, cores, native bfloat16 (AMX, AVX512_BF16), Python."""
    try:
        with open(cpuinfo_path, encoding="utf-8") as f:
            cpuinfo = f.read()
    except OSError:
        cpuinfo = ""
    model = next(
        (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
        platform.processor() or platform.machine(),
    )
    flags = cpu_flags(cpuinfo)
    bf16 = (
        "amx"
        if "amx_bf16" in flags
        else "avx512bf16"
        if "avx512_bf16" in flags
        else "avx512"
        if "avx512f" in flags
        else "avx2"
        if "avx2" in flags
        else platform.machine()
    )
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "native": bf16,
        "load_average_at_start": os.getloadavg(),
        "python": sys.version.split()[0],
    }


def write_json(path: str, value) -> None:
    """`value` as indented JSON, written whole (a temporary file renamed): a kill never leaves half
    a file that a later run would read as finished. (trainer.storage's atomic writes go through
    TensorFlow's file system, which a bench's plain local file does not need to import.)"""
    with open(f"{path}.tmp", "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
    os.replace(f"{path}.tmp", path)


def hardware() -> dict:
    """What two timings must share to be compared: the CPU model, its cores and native arithmetic."""
    info = machine()
    return {key: info[key] for key in ("cpu", "cpus", "native")}


def kept_here(artifact: str) -> None:
    """Lets a bench reuse `artifact` (a job dir or a result file it keeps between runs) only if it
    was measured on this hardware, or records this hardware before `artifact` is made: without it,
    a rerun on another machine would put seconds from two CPUs in one table. Refused with one
    error line and exit 2, naming what to remove."""
    record, here = re.sub(r"\.json$", "", artifact.rstrip("/")) + ".machine.json", hardware()
    if not os.path.exists(artifact):
        write_json(record, here)
        return
    try:
        with open(record, encoding="utf-8") as f:
            recorded = json.load(f)
    except FileNotFoundError:
        recorded = "a machine it did not record"
    if recorded != here:
        print(
            f"error: {artifact} was measured on {recorded}, not on this {here}: remove it to measure it here",
            file=sys.stderr,
        )
        raise SystemExit(2)


def machine_tag(info: dict) -> str:
    """`epyc-avx512bf16`, `xeon-amx`: the CPU family and its fastest native arithmetic."""
    family = next((word for word in ("epyc", "xeon", "ryzen", "core") if word in info["cpu"].lower()), "cpu")
    return f"{family}-{info['native']}"


@contextlib.contextmanager
def printed():
    """Everything printed inside, echoed and kept: the tables exactly as the script prints them."""
    buffer, stdout = io.StringIO(), sys.stdout

    class Tee:
        def write(self, text):
            buffer.write(text)
            return stdout.write(text)

        def flush(self):
            stdout.flush()

    sys.stdout = Tee()
    try:
        yield buffer
    finally:
        sys.stdout = stdout


def add_publish_flag(parser) -> None:
    """--publish, for the scripts whose results only docs/performance.md quotes (the README's
    tables' scripts always publish)."""
    parser.add_argument(
        "--publish",
        action="store_true",
        help="also write what it prints to bench/results/ (docs/performance.md quotes it)",
    )


TUNING = ("TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS", "PYTHONPATH")


def environment(env) -> dict:
    """The variables that change what a benchmark measures (PYTHONPATH: which trainer code ran)."""
    return {name: env[name] for name in TUNING if name in env}


def publish(script: str, result: dict, text: str, results_dir: str = RESULTS, part: str = "") -> str:
    """Writes `result`, the printed `text`, the command line and the machine to
    results_dir/DATE-MACHINE-SCRIPT[-PART].json (a second run the same day gets -2, -3: nothing
    is overwritten) and returns the path. `part`: which of a script's benchmarks ran."""
    info = result.setdefault("machine", machine())
    document = {
        **result,
        "script": f"bench/{script}.py",
        "argv": sys.argv[1:],
        "environment": environment(os.environ),
        "printed": text,
        "finished": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    os.makedirs(results_dir, exist_ok=True)
    name = f"{script}-{part}" if part else script
    stem = os.path.join(results_dir, f"{datetime.date.today().isoformat()}-{machine_tag(info)}-{name}")
    path, n = f"{stem}.json", 1
    while os.path.exists(path):
        n += 1
        path = f"{stem}-{n}.json"
    write_json(path, document)
    print(f"\nResults: {os.path.relpath(path, ROOT)}")
    return path
