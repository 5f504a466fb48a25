"""`python -m trainer.serve` as Vertex AI runs it: a real process on a free 127.0.0.1 port, driven
by a real HTTP client. It answers health only once ready, predicts what `python -m trainer.predict`
predicts, keeps every concurrent client's answers its own, turns bad requests into 4xx JSON while
serving others, and drains in-flight requests on SIGTERM. Its access lines are checked in this
process, on its app with a stand-in for the loaded model."""

import asyncio
import contextlib
import csv
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from conftest import NO_EXTRAS

from trainer.errors import UserError
from trainer.vertex import environment as vertex

HEALTH = "/v1/endpoints/123/deployedModels/456"
PREDICT = "/v1/endpoints/123/deployedModels/456:predict"
TEXTS = [
    "i love this movie",
    "so bad",
    "meh",
    "",
    "the movie was ok , it was fine , ok movie",
    "great movie",
    "i hate it",
    "a movie ?",
    "very good ! very good ! i love it so",
    "awful movie",
    "it is a movie .",
    "hate it so",
    "good , very good",
    "this movie is awful",
    "fine , ok",
]


def environ():
    return {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache")}


@pytest.fixture(scope="module")
def model_dir(tiny_encoder_dir, tiny_data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("serve") / "job"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.task",
            "--encoder",
            tiny_encoder_dir,
            "--training-file",
            tiny_data["train"],
            "--validation-file",
            tiny_data["validation"],
            "--job-dir",
            str(job_dir),
            "--epochs",
            "2",
            "--batch-size",
            "8",
            "--learning-rate",
            "1e-2",
            "--max-seq-length",
            "16",
            "--mixed-precision",
            "off",
            "--train-word-embeddings",
            *NO_EXTRAS,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return str(job_dir / "model")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `python -m trainer.serve` process; `health_seen` lists the health answers while starting."""

    def __init__(self, args, env, health_route, log_path):
        self.log = open(log_path, "w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trainer.serve", "--host", "127.0.0.1", *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.health_seen = []
        self.health_route = health_route

    def url(self, port, route):
        return f"http://127.0.0.1:{port}{route}"

    def wait_ready(self, port, timeout=180):
        self.port = port
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                status = httpx.get(self.url(port, self.health_route), timeout=5).status_code
            except httpx.TransportError:
                status = None  # not listening yet
            if status is not None:
                self.health_seen.append(status)
            if status == 200:
                return self
            time.sleep(0.05)
        self.log.seek(0)
        raise AssertionError(f"server not ready: {self.log.read()}")

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    """Configured the way Vertex configures a container: only through AIP_* variables."""
    port = free_port()
    env = {
        **environ(),
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": HEALTH,
        "AIP_PREDICT_ROUTE": PREDICT,
        "AIP_STORAGE_URI": model_dir,
    }
    running = Server(["--max-instances", "64"], env, HEALTH, tmp_path_factory.mktemp("log") / "server.log")
    try:
        yield running.wait_ready(port)
    finally:
        running.stop()


def post(server, payload, client=httpx):
    return client.post(server.url(server.port, PREDICT), json=payload, timeout=60)


def assert_same_predictions(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g["label"] == e["label"] and g.get("note") == e.get("note")
        if e["probabilities"] is None:
            assert g["probabilities"] is None
            continue
        assert g["probabilities"].keys() == e["probabilities"].keys()
        for name, p in e["probabilities"].items():
            assert g["probabilities"][name] == pytest.approx(p, abs=1e-5)


def test_health_answers_503_while_the_model_loads_and_200_once_ready(server):
    answered = server.health_seen
    assert answered[0] == 503, answered
    assert answered[-1] == 200 and set(answered[:-1]) == {503}


def test_predictions_equal_trainer_predict(server, model_dir, tmp_path):
    with open(tmp_path / "in.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["text"]] + [[t] for t in TEXTS])
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.predict",
            "--model-dir",
            model_dir,
            "--input",
            str(tmp_path / "in.csv"),
            "--output",
            str(tmp_path / "out.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ(),
    )
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    names = [c.removeprefix("probability_") for c in rows[0] if c.startswith("probability_")]
    expected = [
        {"label": r["predicted_label"], "probabilities": {n: float(r[f"probability_{n}"]) for n in names}}
        if not r["note"]
        else {"label": None, "probabilities": None, "note": r["note"]}
        for r in rows
    ]
    response = post(server, {"instances": TEXTS})
    assert response.status_code == 200
    assert_same_predictions(response.json()["predictions"], expected)


def test_instances_may_be_strings_text_objects_or_one_field_rows(server):
    forms = {"instances": ["so bad", {"text": "so bad"}, ["so bad"]], "parameters": {}}
    first, *others = post(server, forms).json()["predictions"]
    for other in others:
        assert_same_predictions([other], [first])


def test_concurrent_clients_each_get_their_own_answers_in_order(server):
    expected = dict(zip(TEXTS, post(server, {"instances": TEXTS}).json()["predictions"]))
    clients, requests_each = 8, 50
    answers = [[] for _ in range(clients)]

    def client(c):
        with httpx.Client() as http:
            for r in range(requests_each):
                texts = [TEXTS[(c * 7 + r * 3 + k) % len(TEXTS)] for k in range(1 + (c + r) % 4)]
                response = post(server, {"instances": texts}, client=http)
                answers[c].append((texts, response.status_code, response.json()))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [len(a) for a in answers] == [requests_each] * clients
    for texts, status, body in (answer for per_client in answers for answer in per_client):
        assert status == 200, body
        assert_same_predictions(body["predictions"], [expected[t] for t in texts])


BAD_REQUESTS = {
    "body is not JSON": ("POST", PREDICT, b'{"instances": [', 400, "body is not JSON"),
    "no instances": ("POST", PREDICT, b'{"inputs": ["so bad"]}', 400, 'no "instances"'),
    "a non-string instance": ("POST", PREDICT, b'{"instances": ["so bad", 3]}', 400, "instances[1]: expected a string"),
    "a text that is not a string": (
        "POST",
        PREDICT,
        b'{"instances": [{"text": null}]}',
        400,
        "instances[0].text: expected a string, got null",
    ),
    "an empty list": ("POST", PREDICT, b'{"instances": []}', 400, '"instances" is empty'),
    "more instances than the limit": (
        "POST",
        PREDICT,
        json.dumps({"instances": ["meh"] * 65}).encode(),
        400,
        "65 items, more than this server's limit of 64",
    ),
    "a body over 1.5 MB": (
        "POST",
        PREDICT,
        json.dumps({"instances": ["meh " * 400_000]}).encode(),
        413,
        "larger than 1,500,000 bytes",
    ),
    "unknown parameters": (
        "POST",
        PREDICT,
        b'{"instances": ["meh"], "parameters": {"top_k": 2}}',
        400,
        "unknown parameter(s) top_k",
    ),
    "a two-text array for a one-text model": (
        "POST",
        PREDICT,
        b'{"instances": [["so", "bad"]]}',
        400,
        'this model reads one text per instance: expected ["..."], got an array of 2 items',
    ),
    "arrays nested too deeply": ("POST", PREDICT, b"[" * 100_000, 400, "nests arrays or objects too deeply"),
    "a wrong route": ("POST", "/predict", b'{"instances": ["meh"]}', 404, "no route /predict"),
    "a wrong method": ("GET", PREDICT, b"", 405, "GET is not allowed"),
}


@pytest.mark.parametrize("case", BAD_REQUESTS)
def test_a_bad_request_gets_a_4xx_naming_the_problem(server, case):
    method, route, body, status, message = BAD_REQUESTS[case]
    response = httpx.request(method, server.url(server.port, route), content=body, timeout=60)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_bad_requests_never_disturb_a_concurrent_good_client(server):
    """The good client is answered before, during and after the bad requests (bounded: 200 requests
    or 120 s), so the check cannot pass on a client that never got to send anything."""
    statuses, answered, stop = [], threading.Event(), threading.Event()
    deadline = time.monotonic() + 120

    def good_client():
        with httpx.Client() as http:
            while len(statuses) < 200 and time.monotonic() < deadline:
                last = stop.is_set()  # one whole request after the bad ones ended
                statuses.append(post(server, {"instances": ["i love it"]}, client=http).status_code)
                answered.set()
                if last:
                    return

    thread = threading.Thread(target=good_client)
    thread.start()
    assert answered.wait(timeout=60)
    with httpx.Client() as http:
        for method, route, body, status, _ in list(BAD_REQUESTS.values()) * 2:
            assert http.request(method, server.url(server.port, route), content=body, timeout=60).status_code == status
    during = len(statuses)
    stop.set()
    thread.join(timeout=60)
    assert len(statuses) > during and set(statuses) == {200}
    assert server.process.poll() is None


def unread_bytes(port):
    """Bytes waiting to be read on the server's end of each established connection to `port`
    (Linux's /proc/net/tcp: local address, state 01 and the receive queue)."""
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return [int(row[4].split(":")[1], 16) for row in rows if int(row[1].split(":")[1], 16) == port and row[3] == "01"]


def send_request(port, text):
    """A whole POST, sent on a raw socket: once sendall returns, the bytes wait at the server."""
    body = json.dumps({"instances": [text, text]}).encode()
    connection = socket.create_connection(("127.0.0.1", port), timeout=60)
    connection.sendall(
        b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    return connection


def read_answer(connection):
    """(status, number of predictions) of the response the server sends before it closes."""
    with connection, connection.makefile("rb") as stream:
        head, _, body = stream.read().partition(b"\r\n\r\n")
    return int(head.split()[1]), len(json.loads(body)["predictions"])


@pytest.mark.slow  # CI's slow line (.ci/run)
def test_sigterm_drains_in_flight_requests_and_exits_0(model_dir, tmp_path):
    """Requests wait up to 10 s to be batched; SIGTERM arrives as soon as the server has read all
    four (its ends of their connections hold no unread byte), so all four are in flight."""
    port = free_port()
    running = Server(
        ["--model-dir", model_dir, "--port", str(port), "--max-wait-ms", "10000"],
        environ(),
        "/health",
        tmp_path / "server.log",
    )
    try:
        running.wait_ready(port)
        connections = [send_request(port, text) for text in TEXTS[:4]]
        deadline = time.monotonic() + 60
        while unread_bytes(port) != [0] * 4:
            assert time.monotonic() < deadline, unread_bytes(port)
            time.sleep(0.01)
        running.process.send_signal(signal.SIGTERM)
        assert [read_answer(c) for c in connections] == [(200, 2)] * 4
        assert running.process.wait(timeout=60) == 0
        running.log.seek(0)
        printed = running.log.read()
        assert "stopped" in printed and "Traceback" not in printed and "Warning" not in printed, printed
    finally:
        running.stop()


def test_a_model_that_fails_to_load_exits_non_zero_with_one_line(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.serve",
            "--model-dir",
            str(tmp_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ(),
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: --model-dir: no exported model in {tmp_path} (expected saved_model.pb; point it at JOB_DIR/model)"
    ]


def test_a_port_in_use_is_one_error_line_and_exit_2_before_listening_is_claimed(tmp_path, capsys):
    """Issue #23, 4: uvicorn printed "listening on ..." then its own Errno 98 line, exit 3."""
    from trainer import cli
    from trainer.serving import server

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code = cli.run(server.main, ["--model-dir", str(tmp_path), "--host", "127.0.0.1", "--port", str(port)])
    out, err = capsys.readouterr()
    assert code == 2 and "listening" not in out
    assert err.splitlines() == [
        f"error: --port: cannot listen on 127.0.0.1:{port}: Address already in "
        f"use; another process listens there; stop it or choose another --port"
    ]


def test_connections_to_the_server_socket_send_without_waiting_for_acks():
    """A kept-alive client's request would otherwise wait on a delayed ACK (~40 ms) per response."""
    import asyncio

    from trainer.serving import server

    sock = server.listening_socket("127.0.0.1", 0)
    accepted = []

    async def exchange():
        async def on_connect(reader, writer):
            accepted.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        listener = await asyncio.start_server(on_connect, sock=sock)
        reader, writer = await asyncio.open_connection(*sock.getsockname())
        await reader.read()
        writer.close()
        listener.close()
        await listener.wait_closed()

    asyncio.run(asyncio.wait_for(exchange(), timeout=30))
    assert accepted == [1]


def test_the_serving_environment_defaults_to_vertex_contract():
    assert vertex.read_serving_environment({}) == vertex.ServingEnvironment(
        port=8080, health_route="/health", predict_route="/predict", storage_uri=None
    )


def test_the_serving_environment_reads_what_vertex_sets():
    env = vertex.read_serving_environment(
        {
            "AIP_HTTP_PORT": "7080",
            "AIP_HEALTH_ROUTE": HEALTH,
            "AIP_PREDICT_ROUTE": PREDICT,
            "AIP_STORAGE_URI": "gs://b/model",
        }
    )
    assert (env.port, env.health_route, env.predict_route, env.storage_uri) == (7080, HEALTH, PREDICT, "gs://b/model")


@pytest.mark.parametrize(
    "variables, message",
    [({"AIP_HTTP_PORT": "http"}, "$AIP_HTTP_PORT"), ({"AIP_PREDICT_ROUTE": "predict"}, "$AIP_PREDICT_ROUTE")],
)
def test_a_malformed_serving_variable_is_one_error_naming_it(variables, message):
    with pytest.raises(UserError, match=message.replace("$", r"\$")):
        vertex.read_serving_environment(variables)


class ReadyModel:
    """Stands in for a loaded model in build_app: its routes and access lines, without TensorFlow."""

    ready, pair, columns = True, False, (None, None)

    async def predict(self, texts):
        return [{"label": "positive"} for _ in texts], None

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        yield


@pytest.fixture
def logged():
    """The trainer logger's messages while the test runs."""

    class Kept(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    messages, logger, handler = [], logging.getLogger("trainer"), Kept()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield messages
    logger.removeHandler(handler)
    logger.setLevel(level)


def requests_to(app):
    async def send():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            await client.get("/health")
            await client.post("/predict", json={"instances": ["a", "b", "c"]})
            await client.post("/predict", json=["a"])
            await client.get("/nowhere")

    asyncio.run(send())


def test_every_request_but_a_passing_health_check_logs_one_access_line(logged):
    from trainer.serving import server

    requests_to(server.build_app(ReadyModel(), vertex.ServingEnvironment(), max_instances=8))
    assert [re.sub(r" \d+\.\d ms$", " ms", m) for m in logged] == [
        "POST /predict 200 3 instances ms",
        "POST /predict 400 - ms",
        "GET /nowhere 404 - ms",
    ]


def test_no_access_log_turns_the_access_lines_off(logged):
    from trainer.serving import server

    requests_to(server.build_app(ReadyModel(), vertex.ServingEnvironment(), max_instances=8, access_log=False))
    assert logged == []
    args = server.build_arg_parser(vertex.ServingEnvironment()).parse_args(["--model-dir", "m", "--no-access-log"])
    assert args.access_log is False


# --- issue 37: empty texts, the listening address, errors in JSON, the model's own columns ------


def test_an_empty_text_gets_a_note_instead_of_a_label(server):
    """Issue #37, 8: an empty text was answered `neutral 0.997`; training refuses such rows."""
    response = post(server, {"instances": ["", " \n", "so bad"]})
    assert response.status_code == 200
    empty, blank, text = response.json()["predictions"]
    assert empty == blank == {"label": None, "probabilities": None, "note": "empty text: no prediction"}
    assert text["label"] in ("negative", "neutral", "positive") and "note" not in text


def test_the_server_listens_on_this_machine_only_unless_vertex_runs_it():
    """Issue #37, 14: the default was 0.0.0.0 everywhere; Vertex's container sets AIP_HTTP_PORT."""
    from trainer.serving import server

    def host(variables, *flags):
        parser = server.build_arg_parser(vertex.read_serving_environment(variables))
        return parser.parse_args(["--model-dir", "m", *flags]).host

    assert host({}) == "127.0.0.1" and host({"AIP_HTTP_PORT": "8080"}) == "0.0.0.0"
    assert host({}, "--host", "0.0.0.0") == "0.0.0.0"


def test_the_help_says_the_access_log_is_on_unless_turned_off():
    from trainer.serving import server

    text = " ".join(server.build_arg_parser(vertex.ServingEnvironment()).format_help().split())
    assert "--no-access-log Turn off the access log: by default the server logs a line per request" in text
    assert "(default: True)" not in text


class UnencodableAnswers(ReadyModel):
    """A model whose answer JSON cannot hold: the error is the server's, the client gets a 500."""

    async def predict(self, texts):
        return [{"label": object()} for _ in texts], None


def test_an_internal_error_answers_json_and_logs_one_line(logged):
    from trainer.serving import server

    app = server.build_app(UnencodableAnswers(), vertex.ServingEnvironment(), max_instances=8)

    async def send():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.post("/predict", json={"instances": ["a"]})

    response = asyncio.run(send())
    assert response.status_code == 500 and response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "prediction failed: TypeError"}
    assert len(logged) == 2 and logged[0].startswith("prediction failed: TypeError: ")
    assert re.sub(r" \d+\.\d ms$", " ms", logged[1]) == "POST /predict 500 1 instances ms"


def test_an_object_instance_may_name_its_texts_by_the_models_own_columns():
    """Issue #37, 12: a pair model trained on question/answer is sent its training rows' objects."""
    from trainer.serving import protocol

    payload = {"instances": [{"question": "q", "answer": "a"}, {"text": "t", "text_pair": "p"}, ["x", "y"]]}
    assert protocol.read_instances(payload, 8, pair=True, columns=("question", "answer")) == [
        ("q", "a"),
        ("t", "p"),
        ("x", "y"),
    ]
    with pytest.raises(
        protocol.RequestError,
        match='no "text_pair" field: expected {"text": "...", '
        '"text_pair": "..."} or {"question": "...", "answer": "..."}',
    ):
        protocol.read_instances({"instances": [{"question": "q"}]}, 8, pair=True, columns=("question", "answer"))
