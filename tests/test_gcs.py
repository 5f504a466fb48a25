"""gs:// end to end through TensorFlow's own GCS client, against a local emulator.

TensorFlow cannot be pointed at an emulator by configuration (its endpoints are compiled in), so
tests/helpers/gcs_emulator.py runs gcp-storage-emulator behind a loopback HTTPS-intercepting proxy that
libcurl inside TensorFlow reaches through https_proxy, trusting a throwaway CA via
CURL_CA_BUNDLE. Nothing in trainer/ knows about the emulator: every gs:// access below is the
product's own tf.io.gfile code. Objects are seeded and checked through the emulator's HTTP API,
independently of TensorFlow.
"""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.parse

import pytest
from conftest import NO_EXTRAS
from gcs_emulator import GcsEmulator

BUCKET = "vbt-test"
EPOCHS = 2


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    emulator = GcsEmulator(tmp_path_factory.mktemp("gcs"), bucket=BUCKET).start()
    try:
        yield emulator
    finally:
        emulator.stop()


def run(gcs, *args, module=None, code=None, timeout=240):
    environ = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"), **gcs.env}
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", module, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environ)
    # Nothing tried to reach anything but the emulator (another host, plain HTTP, metadata server).
    assert gcs.refused == [], gcs.refused
    return result


def gs(name):
    return f"gs://{BUCKET}/{name}"


NEW_MODEL = (
    "assets/vocab.txt",
    "fingerprint.pb",
    "saved_model.pb",
    "variables/variables.data-00000-of-00001",
    "variables/variables.index",
)
STORAGE_SCRIPT = (
    textwrap.dedent("""
    import json, sys
    from trainer import storage
    from trainer.errors import UserError
    out = {}
    storage.write_text_atomic("gs://BUCKET/basics/notes/a.txt", "first")
    storage.write_text_atomic("gs://BUCKET/basics/notes/a.txt", "second, h\\u00e9llo")
    out["read_text"] = storage.read_text("gs://BUCKET/basics/notes/a.txt")
    storage.write_bytes_atomic("gs://BUCKET/basics/blob.bin", bytes(range(256)) * 3)
    out["read_bytes_ok"] = storage.read_bytes("gs://BUCKET/basics/blob.bin") == bytes(range(256)) * 3
    out["exists"] = [storage.exists(p) for p in ("gs://BUCKET/basics/notes/a.txt", "gs://BUCKET/basics/notes",
                                                  "gs://BUCKET/basics/nothing.txt")]
    out["glob"] = storage.expand_paths("gs://BUCKET/basics/data/*.csv", "--training-file")
    out["list"] = storage.expand_paths("gs://BUCKET/basics/data/b.csv, gs://BUCKET/basics/data/a.csv",
                                       "--training-file")
    errors = {}
    for spec in ("gs://BUCKET/basics/data/missing.csv", "gs://BUCKET/basics/data/*.tsv", "gs://BUCKET/basics/data"):
        try:
            storage.expand_paths(spec, "--training-file")
        except UserError as e:
            errors[spec] = str(e)
    out["errors"] = errors
    import tensorflow as tf
    for name in ("saved_model.pb", "variables/variables.index", "variables/old-only.bin"):
        storage.write_text_atomic("gs://BUCKET/basics/model/" + name, "old " + name)
    tmp = storage.temporary_sibling("gs://BUCKET/basics/model")
    tf.io.gfile.makedirs(tmp + "/variables")
    for name in NEW_MODEL:
        with tf.io.gfile.GFile(tmp + "/" + name, "w") as f:
            f.write("new " + name)
    storage.replace_directory(tmp, "gs://BUCKET/basics/model")
    print("RESULT " + json.dumps(out))
""")
    .replace("BUCKET", BUCKET)
    .replace("NEW_MODEL", repr(NEW_MODEL))
)


@pytest.fixture(scope="module")
def storage_basics(gcs):
    for name in ("a.csv", "b.csv", "notes.txt"):
        gcs.put(f"basics/data/{name}", "text,label\nhi,positive\n")
    result = run(gcs, code=STORAGE_SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.split("RESULT ", 1)[1])


def test_storage_basics_on_gs(gcs, storage_basics):
    out = storage_basics
    assert out["read_text"] == "second, h\u00e9llo"
    assert gcs.get("basics/notes/a.txt").decode("utf-8") == "second, h\u00e9llo"
    assert out["read_bytes_ok"]
    assert out["exists"] == [True, True, False]
    assert out["glob"] == [gs("basics/data/a.csv"), gs("basics/data/b.csv")]
    assert out["list"] == [gs("basics/data/b.csv"), gs("basics/data/a.csv")]
    errors = out["errors"]
    assert errors[gs("basics/data/missing.csv")] == f"--training-file: file not found: {gs('basics/data/missing.csv')}"
    assert errors[gs("basics/data/*.tsv")] == f"--training-file: no file matches {gs('basics/data/*.tsv')}"
    assert "is a directory" in errors[gs("basics/data")]
    # Atomic writes leave no temporary objects behind.
    assert [n for n in gcs.names("basics/") if ".tmp-" in n] == []


def test_replace_directory_on_gs_lands_the_top_level_files_last(gcs, storage_basics):
    files = [n for n in gcs.names("basics/model/") if not n.endswith("/")]  # not directory markers
    assert files == [f"basics/model/{n}" for n in NEW_MODEL]
    assert [n for n in gcs.names("basics/") if n.startswith("basics/.model.tmp-")] == []
    for name in NEW_MODEL:
        assert gcs.get(f"basics/model/{name}").decode() == f"new {name}"
    # GCS renames object by object: saved_model.pb, which readers look for first, must go first
    # and come back last, so that whenever it exists the rest of the model is complete.
    requests = [(method, urllib.parse.unquote(path)) for method, _, path, _ in gcs.requests]
    prefix = f"/storage/v1/b/{BUCKET}/o/basics/model/"
    deleted = [
        p[len(prefix) :]
        for m, p in requests
        if m == "DELETE" and p.startswith(prefix) and ".tmp-" not in p and not p.endswith("/")
    ]
    assert deleted[0] == "saved_model.pb" and sorted(deleted) == [
        "saved_model.pb",
        "variables/old-only.bin",
        "variables/variables.index",
    ]
    moved = [
        p.split(f"/rewriteTo/b/{BUCKET}/o/basics/model/")[1]
        for m, p in requests
        if m == "POST" and "/o/basics/.model.tmp-" in p and "/rewriteTo/" in p and not p.endswith("/")
    ]
    assert sorted(moved) == sorted(NEW_MODEL)
    assert moved[-2:] == ["fingerprint.pb", "saved_model.pb"]


MODEL_DIR_SCRIPT = textwrap.dedent("""
    import json
    from trainer import storage
    from trainer.errors import UserError
    from trainer.serving import model_dir
    import tensorflow as tf
    refusals = {}
    for path in ("gs://BUCKET/owned/mine", "gs://BUCKET/owned/mine/notes.txt",
                 "gs://BUCKET/owned/export", "gs://BUCKET/owned/new"):
        try:
            model_dir.check_replaceable(path)
            refusals[path] = None
        except UserError as e:
            refusals[path] = str(e)
    try:
        model_dir.check_apart("gs://BUCKET/owned", [("--training-file", "gs://BUCKET/owned/mine/*.csv")])
    except UserError as e:
        refusals["apart"] = str(e)
    tmp = storage.temporary_sibling("gs://BUCKET/owned/export")
    for name in ("saved_model.pb", "variables/variables.index"):
        with tf.io.gfile.GFile(tmp + "/" + name, "w") as f:
            f.write("new " + name)
    model_dir.write_marker(tmp)
    storage.replace_directory(tmp, "gs://BUCKET/owned/export", marker=model_dir.MARKER)
    print("RESULT " + json.dumps(refusals))
""").replace("BUCKET", BUCKET)


@pytest.fixture(scope="module")
def model_dir_checks(gcs):
    gcs.put("owned/mine/notes.txt", "keep me")
    for name in ("saved_model.pb", "variables/variables.index", "trainer_export.json"):
        gcs.put(f"owned/export/{name}", "old")
    result = run(gcs, code=MODEL_DIR_SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.split("RESULT ", 1)[1])


def test_a_gs_model_dir_is_replaced_only_when_it_holds_an_export_of_ours(gcs, model_dir_checks):
    """Issue #49, 1: on gs:// a replaced directory loses every object under its prefix."""
    refused = model_dir_checks
    assert refused[gs("owned/mine")].startswith(
        f"--model-dir: {gs('owned/mine')} holds files this trainer did not write (notes.txt)"
    )
    assert "is a file" in refused[gs("owned/mine/notes.txt")]
    assert refused[gs("owned/export")] is None and refused[gs("owned/new")] is None
    assert refused["apart"].startswith(f"--model-dir: {gs('owned')} holds --training-file")
    assert gcs.get("owned/mine/notes.txt") == b"keep me"


def test_replacing_a_gs_export_removes_its_marker_last_and_moves_it_in_first(gcs, model_dir_checks):
    """So that a replacement cut short leaves a directory still known to be an export."""
    requests = [(method, urllib.parse.unquote(path)) for method, _, path, _ in gcs.requests]
    prefix = f"/storage/v1/b/{BUCKET}/o/owned/export/"
    deleted = [p[len(prefix) :] for m, p in requests if m == "DELETE" and p.startswith(prefix) and not p.endswith("/")]
    target = f"/rewriteTo/b/{BUCKET}/o/owned/export/"
    moved = [
        p.split(target)[1]
        for m, p in requests
        if m == "POST" and "/o/owned/.export.tmp-" in p and target in p and not p.endswith("/")
    ]
    assert deleted[-1] == "trainer_export.json" and moved[0] == "trainer_export.json"
    assert gcs.get("owned/export/saved_model.pb") == b"new saved_model.pb"


def train_args(tiny_encoder_dir, job_dir, *extra):
    return [
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        gs("data/train.csv"),
        "--validation-file",
        gs("data/validation.csv"),
        "--testing-file",
        gs("data/test.csv"),
        "--job-dir",
        job_dir,
        "--epochs",
        EPOCHS,
        "--batch-size",
        "8",
        "--learning-rate",
        "1e-2",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
        "--log-every-seconds",
        "1",
        *NO_EXTRAS,
        *extra,
    ]


@pytest.fixture(scope="module")
def gcs_run(gcs, tiny_encoder_dir, tiny_data):
    for split, path in tiny_data.items():
        with open(path, "rb") as f:
            gcs.put(f"data/{split}.csv", f.read())
    result = run(gcs, *train_args(tiny_encoder_dir, gs("run")), module="trainer.task")
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.mark.slow
def test_training_reads_and_writes_gs(gcs, gcs_run):
    names = gcs.names("run/")
    for name in (
        "config.json",
        "metrics.json",
        "eval_history.csv",
        "training.log",
        "model/saved_model.pb",
        "model/variables/variables.index",
    ):
        assert f"run/{name}" in names, (name, names)
    assert any(n.startswith("run/tensorboard/") for n in names), names
    assert [n for n in names if ".tmp-" in n] == []
    metrics = json.loads(gcs.get("run/metrics.json"))
    assert metrics["dataset_sizes"] == {"train": 90, "validation": 30, "test": 30}
    assert metrics["epochs_completed"] == EPOCHS
    config = json.loads(gcs.get("run/config.json"))
    assert json.dumps(config).count(gs("data/train.csv")) == 1
    history = list(csv.DictReader(io.StringIO(gcs.get("run/eval_history.csv").decode())))
    assert [int(r["epoch"]) for r in history] == list(range(1, EPOCHS + 1))
    log = gcs.get("run/training.log").decode()
    assert f"job dir {gs('run')}" in log and "macro-F1" in log
    assert "Traceback" not in gcs_run.stderr


@pytest.mark.slow
def test_a_finished_gs_run_is_not_overwritten(gcs, gcs_run, tiny_encoder_dir):
    before = gcs.get("run/metrics.json")
    result = run(gcs, *train_args(tiny_encoder_dir, gs("run")), module="trainer.task")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "holds a finished run" in result.stderr and "--overwrite" in result.stderr
    assert gcs.get("run/metrics.json") == before
    assert "error:" not in gcs.get("run/training.log").decode()  # the finished run's log is its own


@pytest.mark.slow
def test_a_killed_gs_run_leaves_its_log_and_history_up_to_the_last_epoch(gcs, tiny_encoder_dir, tmp_path):
    from conftest import labelled_rows, write_csv

    with open(write_csv(tmp_path / "train.csv", labelled_rows(600, 1)), "rb") as f:
        gcs.put("data/long-train.csv", f.read())
    arguments = [
        *train_args(tiny_encoder_dir, gs("killed")),
        "--epochs",
        "20",
        "--training-file",
        gs("data/long-train.csv"),
    ]
    environ = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"), **gcs.env}
    process = subprocess.Popen(
        [sys.executable, "-m", "trainer.task", *map(str, arguments)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environ,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and process.poll() is None:
            if (
                "killed/training.log" in gcs.names("killed/")
                and "epoch 2/20 done" in gcs.get("killed/training.log").decode()
            ):
                break
            time.sleep(0.2)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        process.kill()
    log = gcs.get("killed/training.log").decode()
    assert "epoch 1/20 done" in log and "epoch 2/20 done" in log
    history = list(csv.DictReader(io.StringIO(gcs.get("killed/eval_history.csv").decode())))
    assert [int(row["epoch"]) for row in history][:2] == [1, 2]
    assert "killed/metrics.json" not in gcs.names("killed/")


@pytest.mark.slow
def test_predict_from_gs_to_gs(gcs, gcs_run, tiny_data):
    output = gs("predictions/test.csv")
    result = run(
        gcs,
        "--model-dir",
        gs("run/model"),
        "--input",
        gs("data/test.csv"),
        "--output",
        output,
        "--batch-size",
        "7",
        module="trainer.predict",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"wrote 30 rows with predictions to {output}" in result.stdout
    rows = list(csv.DictReader(io.StringIO(gcs.get("predictions/test.csv").decode("utf-8"))))
    with open(tiny_data["test"], encoding="utf-8") as f:
        expected = list(csv.DictReader(f))
    assert [(r["text"], r["label"]) for r in rows] == [(r["text"], r["label"]) for r in expected]
    for row in rows:
        assert row["predicted_label"] in ("negative", "neutral", "positive")
        assert sum(float(row[f"probability_{n}"]) for n in ("negative", "neutral", "positive")) == pytest.approx(
            1.0, abs=1e-5
        )
    again = run(
        gcs,
        "--model-dir",
        gs("run/model"),
        "--input",
        gs("data/test.csv"),
        "--output",
        output,
        module="trainer.predict",
    )
    assert again.returncode == 2 and "exists; pass --overwrite" in again.stderr


@pytest.mark.slow
def test_serve_loads_the_model_from_aip_storage_uri_on_gs(gcs, gcs_run, tmp_path):
    """As on Vertex AI: no --model-dir, the model comes from AIP_STORAGE_URI (a gs:// copy)."""
    import httpx
    from test_server import Server, free_port

    port = free_port()
    env = {
        **os.environ,
        "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"),
        **gcs.env,
        "AIP_STORAGE_URI": gs("run/model"),
        "AIP_HTTP_PORT": str(port),
    }
    server = Server([], env, "/health", tmp_path / "server.log")
    try:
        server.wait_ready(port)
        response = httpx.post(server.url(port, "/predict"), json={"instances": ["so good", "so bad"]}, timeout=60)
        assert response.status_code == 200
        assert {p["label"] for p in response.json()["predictions"]} <= {"negative", "neutral", "positive"}
    finally:
        server.stop()
    assert gcs.refused == [], gcs.refused


# --------------------------------------------------------------------------- failures, one line each


def closed_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FAILURES = {
    # (bucket, environment changes, what the line must say)
    "unreachable": (BUCKET, "proxy-closed", ["cannot reach Cloud Storage", "check the network connection"]),
    "no credentials": (BUCKET, "no-token", ["no Google Cloud credentials", "gcloud auth application-default login"]),
    "permission denied": ("vbt-locked", None, ["permission denied", "roles/storage.objectViewer", "gs://vbt-locked"]),
    "missing bucket": (
        "vbt-missing",
        None,
        ["bucket gs://vbt-missing does not exist", "gcloud storage buckets create gs://vbt-missing"],
    ),
}


def model_stub(tmp_path):
    """Enough of a local model for predict's checks to reach --input."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "saved_model.pb").write_bytes(b"")
    return tmp_path / "model"


def entry_point_args(name, bucket, tiny_encoder_dir, tiny_data, tmp_path):
    where = f"gs://{bucket}/first-hour"
    return {
        "trainer.task": [
            "--encoder",
            tiny_encoder_dir,
            "--training-file",
            tiny_data["train"],
            "--job-dir",
            f"{where}/run",
            "--epochs",
            "1",
            "--max-seq-length",
            "16",
        ],
        "trainer.predict": [
            "--model-dir",
            model_stub(tmp_path),
            "--input",
            f"{where}/in.csv",
            "--output",
            tmp_path / "out.csv",
        ],
        "trainer.prepare": ["--input", f"{where}/raw.csv", "--output-dir", tmp_path],
        "trainer.export_encoder": [
            "--encoder",
            tiny_encoder_dir,
            "--output-dir",
            f"{where}/exported",
            "--max-seq-length",
            "16",
        ],
    }[name], where


def run_failing(gcs, module, failure, tiny_encoder_dir, tiny_data, tmp_path):
    bucket, change, expected = FAILURES[failure]
    gcs.deny("vbt-locked")
    args, where = entry_point_args(module, bucket, tiny_encoder_dir, tiny_data, tmp_path)
    environ = {
        **os.environ,
        "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"),
        **gcs.env,
        "HOME": str(tmp_path),
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
    }
    if change == "proxy-closed":
        dead = f"http://127.0.0.1:{closed_port()}"
        environ.update(https_proxy=dead, HTTPS_PROXY=dead, ALL_PROXY=dead, all_proxy=dead)
    elif change == "no-token":
        del environ["GOOGLE_AUTH_TOKEN_FOR_TESTING"]
    result = subprocess.run(
        [sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True, timeout=240, env=environ
    )
    assert gcs.refused == []
    return result, where, expected


ENTRY_POINTS = ["trainer.task", "trainer.predict", "trainer.prepare", "trainer.export_encoder"]


# Every kind of failure through the trainer, and every other entry point with one of them: the
# translation is trainer.storage's, shared by all.
# The trainer's cases of a failure another entry point also shows are in the slow tier.
CASES = [
    pytest.param("trainer.task", failure, marks=pytest.mark.slow)
    if failure in ("missing bucket", "permission denied")
    else ("trainer.task", failure)
    for failure in sorted(FAILURES)
] + [(module, failure) for module, failure in zip(ENTRY_POINTS[1:], sorted(FAILURES))]


@pytest.mark.parametrize("module, failure", CASES)
def test_every_gs_failure_is_one_line_naming_the_path_and_what_to_do(
    gcs, tiny_encoder_dir, tiny_data, tmp_path, module, failure
):
    result, where, expected = run_failing(gcs, module, failure, tiny_encoder_dir, tiny_data, tmp_path)
    output = result.stdout + result.stderr
    errors = [line for line in output.splitlines() if line.startswith("error:") or " error: " in line]
    assert result.returncode != 0 and len(errors) == 1, output
    assert where in errors[0] and all(text in errors[0] for text in expected), errors[0]
    assert "Traceback" not in output and "tensorflow.python.framework.errors" not in output, output


@pytest.mark.slow
def test_report_is_rebuilt_for_a_gs_run(gcs, gcs_run):
    result = run(gcs, "--job-dir", gs("run"), module="trainer.report")
    assert result.returncode == 0, result.stdout + result.stderr
    names = gcs.names("run/")
    for name in (
        "report.html",
        "errors.csv",
        "MODEL_CARD.md",
        "report/learning_curves.png",
        "report/confusion_test.png",
        "report/reliability.png",
    ):
        assert f"run/{name}" in names, (name, names)
    assert [n for n in names if ".tmp-" in n] == []
    assert gcs.get("run/report.html").count(b'<img src="data:image/png;base64,') == 5
    assert f"--model-dir {gs('run/model')}".encode() in gcs.get("run/MODEL_CARD.md")


TAKE_LOCK = textwrap.dedent("""
    from trainer.training import lock
    held = lock.acquire(JOB_DIR, "job.lock", {}, str)
    print(held.owner.pid)
    held.release()
""")


@pytest.mark.slow
def test_a_second_run_on_a_gs_job_dir_is_refused_and_a_killed_runs_lock_is_taken_over(
    gcs, tiny_encoder_dir, tiny_data, tmp_path
):
    """Issue #37, 1: a job resubmitted to the gs:// dir of one that still trains. The first trains
    600 rows for 50 epochs: it is still going when the second has been refused."""
    from conftest import labelled_rows, write_csv

    for split, path in {**tiny_data, "long-train": write_csv(tmp_path / "train.csv", labelled_rows(600, 1))}.items():
        with open(path, "rb") as f:
            gcs.put(f"data/{split}.csv", f.read())
    arguments = [
        *train_args(tiny_encoder_dir, gs("busy")),
        "--epochs",
        "50",
        "--training-file",
        gs("data/long-train.csv"),
    ]
    environ = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"), **gcs.env}
    first = subprocess.Popen(
        [sys.executable, "-m", "trainer.task", *map(str, arguments)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environ,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and first.poll() is None and "busy/job.lock" not in gcs.names("busy/"):
            time.sleep(0.2)
        second = run(gcs, *arguments, module="trainer.task")
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    started = json.loads(gcs.get("busy/job.lock"))["started"]
    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stderr.splitlines() == [
        f"error: --job-dir: {gs('busy')} is in use by another trainer.task run (pid {first.pid} on host "
        f"{os.uname().nodename}, started {started}); wait for it to finish, or choose another --job-dir"
    ]
    assert "busy/metrics.json" not in gcs.names("busy/")
    taken = run(gcs, code=TAKE_LOCK.replace("JOB_DIR", repr(gs("busy"))))
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert "busy/job.lock" not in gcs.names("busy/")
