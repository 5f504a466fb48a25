"""gs:// where TensorFlow is not installed (the ONNX runtime's environment): trainer.predict and
trainer.serve read a model dir from Cloud Storage, as Vertex AI hands the serving container one
in AIP_STORAGE_URI, through google-cloud-storage (trainer/gcs_gfile.py), and trainer.predict
uploads its --output there; what fails is one line, as with TensorFlow's own client.

Every process here cannot import TensorFlow (tests/helpers/without_tensorflow.py) and reaches only
127.0.0.1: gcp-storage-emulator (tests/helpers/gcs_emulator.py, plain HTTP, which google-cloud-storage
reaches through STORAGE_EMULATOR_HOST, anonymously), or a stand-in answering every request as
the service answers a refused one. The model is test_onnx_runtime.py's tiny classifier with its
float32 ONNX copy.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from conftest import HELPERS, read_csv
from gcs_emulator import GcsEmulator
from test_onnx_runtime import TEXTS, assert_same_rows, model_dir, texts_file  # noqa: F401  fixtures

BUCKET = "vbt-test"
# A run of its own (test_onnx_runtime.py's model, trained again in this file's worker) and an
# emulator: about a minute, in CI's slow line.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gcs(tmp_path_factory, model_dir, texts_file):  # noqa: F811  the imported fixtures
    """The emulator holding the job dir a run leaves on Cloud Storage: JOB/model (the export and
    its ONNX copy) and the texts to score."""
    emulator = GcsEmulator(tmp_path_factory.mktemp("gcs"), bucket=BUCKET).start()
    try:
        for folder, _, files in os.walk(model_dir):
            for name in files:
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    emulator.put(f"job/model/{os.path.relpath(path, model_dir)}", f.read())
        with open(texts_file, "rb") as f:
            emulator.put("in.csv", f.read())
        yield emulator
    finally:
        emulator.stop()


def gs(name):
    return f"gs://{BUCKET}/{name}"


def environment(**settings):
    """This process's environment with no Google credentials to find and no metadata server to
    ask (google-auth would ask 169.254.169.254 whether it runs on Google's machines)."""
    environ = {
        name: value
        for name, value in os.environ.items()
        if name not in ("GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST")
    }
    return {**environ, "NO_GCE_CHECK": "true", **settings}


def emulated(gcs):
    return environment(STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{gcs.emulator_port}")


def without_tensorflow(module, *args, env, timeout=120):
    return subprocess.run(
        [sys.executable, os.path.join(HELPERS, "without_tensorflow.py"), "-m", module, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def predicted_locally(model_dir, texts_file, output):  # noqa: F811
    result = without_tensorflow(
        "trainer.predict", "--model-dir", model_dir, "--input", texts_file, "--output", output, env=environment()
    )
    assert result.returncode == 0, result.stderr
    return read_csv(output)


def test_predict_reads_a_gs_model_dir_and_input_and_uploads_its_output(
    gcs,
    model_dir,  # noqa: F811
    texts_file,  # noqa: F811
    tmp_path,
):
    expected = predicted_locally(model_dir, texts_file, tmp_path / "local.csv")
    result = without_tensorflow(
        "trainer.predict",
        "--model-dir",
        gs("job/model"),
        "--input",
        gs("in.csv"),
        "--output",
        gs("scored/out.csv"),
        env=emulated(gcs),
    )
    assert result.returncode == 0, result.stderr
    assert f"loaded the onnx model ({gs('job/model/onnx')})" in result.stdout
    (tmp_path / "uploaded.csv").write_bytes(gcs.get("scored/out.csv"))
    assert_same_rows(read_csv(tmp_path / "uploaded.csv"), expected)


def wait_ready(url, process, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the server never answered 200 on {url} (exit code {process.poll()})")


def test_the_server_serves_the_model_vertex_names_in_aip_storage_uri(
    gcs,
    model_dir,  # noqa: F811
    texts_file,  # noqa: F811
    tmp_path,
):
    from test_server import free_port

    expected = predicted_locally(model_dir, texts_file, tmp_path / "local.csv")
    port = free_port()
    settings = {
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": "/health",
        "AIP_PREDICT_ROUTE": "/predict",
        "AIP_STORAGE_URI": gs("job/model"),
    }
    log = open(tmp_path / "server.log", "w+")
    process = subprocess.Popen(
        [sys.executable, os.path.join(HELPERS, "without_tensorflow.py"), "-m", "trainer.serve", "--host", "127.0.0.1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=emulated(gcs) | settings,
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}/health", process)
        answer = httpx.post(f"http://127.0.0.1:{port}/predict", json={"instances": TEXTS}, timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    log.seek(0)
    lines = log.read()
    assert code == 0 and f"model ready: onnx ({gs('job/model/onnx')})" in lines, lines
    served = answer.json()["predictions"]
    assert [p["label"] or "" for p in served] == [row["predicted_label"] for row in expected]  # "": an empty text
    for prediction, row in zip(served, expected):
        for name, value in (prediction["probabilities"] or {}).items():
            assert value == pytest.approx(float(row[f"probability_{name}"]), abs=1e-4)


def test_a_model_dir_missing_from_its_bucket_is_one_line(gcs, tmp_path):
    result = without_tensorflow(
        "trainer.predict",
        "--model-dir",
        gs("job/nothing"),
        "--input",
        gs("in.csv"),
        "--output",
        tmp_path / "out.csv",
        env=emulated(gcs),
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: --model-dir: no exported model in {gs('job/nothing')} "
        f"(expected saved_model.pb; point it at JOB_DIR/model)"
    ]


def test_a_bucket_that_does_not_exist_is_named(gcs, tmp_path):
    result = without_tensorflow(
        "trainer.predict",
        "--model-dir",
        "gs://no-such-bucket/model",
        "--input",
        gs("in.csv"),
        "--output",
        tmp_path / "out.csv",
        env=emulated(gcs),
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: gs://no-such-bucket/model/onnx.json: bucket gs://no-such-bucket does not exist or this "
        "account cannot see it; create it (gcloud storage buckets create gs://no-such-bucket) or fix the path"
    ]


class Refusing(BaseHTTPRequestHandler):
    """Cloud Storage's answer to a caller without the role: 403 and its JSON error."""

    def do_GET(self):
        body = json.dumps({"error": {"code": 403, "message": "caller does not have storage.objects.get access"}})
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format, *args):
        pass


def test_a_refused_read_names_the_role_to_grant(texts_file, tmp_path):  # noqa: F811
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = without_tensorflow(
            "trainer.predict",
            "--model-dir",
            gs("job/model"),
            "--input",
            texts_file,
            "--output",
            tmp_path / "out.csv",
            env=environment(STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{server.server_port}"),
        )
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {gs('job/model/onnx.json')}: permission denied; grant the account you run as read access "
        f"(roles/storage.objectViewer) or, to write there, roles/storage.objectAdmin on gs://{BUCKET}, or use "
        f"a bucket it can access"
    ]


def test_no_credentials_is_one_line_saying_how_to_log_in(texts_file, tmp_path):  # noqa: F811
    """No STORAGE_EMULATOR_HOST: the real service's client, which finds no credentials here
    (nothing is sent)."""
    home = tmp_path / "home"
    home.mkdir()
    result = without_tensorflow(
        "trainer.predict",
        "--model-dir",
        gs("job/model"),
        "--input",
        texts_file,
        "--output",
        tmp_path / "out.csv",
        env=environment(HOME=str(home), CLOUDSDK_CONFIG=str(home / "gcloud")),
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {gs('job/model/onnx.json')}: no Google Cloud credentials for Cloud Storage; run `gcloud auth "
        f"application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file) "
        f"and retry"
    ]


def test_a_file_system_other_than_cloud_storage_is_one_line_naming_the_ways_out(model_dir, tmp_path):  # noqa: F811
    result = without_tensorflow(
        "trainer.predict",
        "--model-dir",
        model_dir,
        "--input",
        "s3://bucket/in.csv",
        "--output",
        tmp_path / "out.csv",
        env=environment(),
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: s3://bucket/in.csv: without TensorFlow (not in this Python), files are read from local paths "
        "or gs://, and written to local paths or uploaded to gs:// once finished; copy the files to a local "
        "path first, or install the TensorFlow stack with `bash scripts/install.sh`"
    ]
