"""`python -m trainer.serve`: an exported model behind Vertex AI's custom-container HTTP contract.

Starlette + uvicorn: the server needs two routes, our own validation messages and a lifespan
hook, which is all Starlette is (FastAPI adds pydantic models and its own 422 error shape, which
the JSON `{"error": ...}` contract would have to undo); uvicorn is the reference ASGI server and
drains in-flight requests on SIGTERM, which is how Vertex stops a replica.

The socket opens at once; the model loads and warms up on a background thread meanwhile, and
the health route answers 503 until it is ready (Vertex routes traffic only after a 200).
Predictions are micro-batched (trainer.serving.batching) and computed by
trainer.inference.loaded_model.predict_texts, the code `python -m trainer.predict` runs.
"""

import argparse
import asyncio
import contextlib
import errno
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from trainer import cli, helptext, installed
from trainer.errors import UserError
from trainer.inference import loaded_model
from trainer.serving import columns, predict_file, protocol, variants
from trainer.serving.batching import MicroBatcher
from trainer.vertex import environment as vertex

log = logging.getLogger("trainer")
# Texts of several lengths, so each padded length the graph uses is compiled before traffic.
WARM_UP_TEXTS = [" ".join(["warm"] * n) for n in (1, 8, 24, 48, 96, 200)]


class ModelService:
    """The model's life: loading (health 503), ready (predictions), or failed (the server exits)."""

    def __init__(
        self,
        model_dir: str,
        max_batch_size: int,
        max_wait: float,
        on_failure: Callable[[], None] = lambda: None,
        precision: str = "auto",
        runtime: str = "auto",
    ):
        self.model_dir = model_dir
        # --runtime and --precision: resolved against the model dir when loading
        self.runtime, self.precision = runtime, precision
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait
        self.on_failure = on_failure
        self.error: str | None = None
        self.pair = False  # a sentence-pair model: instances hold text and text_pair
        self.columns = columns.UNKNOWN  # the model's own text columns, accepted as instance fields
        self._batcher: MicroBatcher | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="inference")
        self._explainer = None  # the float32 module, loaded by the first {"explain": true}
        # Why {"explain": true} is refused for this model's kind (a tagger's), known once it loads:
        # answered before anything is predicted.
        self.explain_refused: str | None = None

    @property
    def ready(self) -> bool:
        return self._batcher is not None

    async def predict(self, texts):
        return await self._batcher.predict(texts)

    async def explain(self, texts):
        """Each text's token attributions ({"explain": true}), computed on the inference thread
        by the float32 model, as trainer.explain computes them; loaded at the first request
        that asks, so a server never asked pays nothing."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._explain, texts)

    def _explain(self, texts):
        from trainer.config import OutputConfig
        from trainer.explaining import attribute
        from trainer.serving import export

        if self._explainer is None:
            model = export.load_module(self.model_dir)
            attribute.require_explainable(model, self.model_dir)
            self._explainer = model
        texts, pairs = ([a for a, _ in texts], [b for _, b in texts]) if self.pair else (texts, None)
        explained = attribute.explain_texts(self._explainer, texts, pairs, OutputConfig().ig_steps)
        return protocol.explanations(explained, self.pair)

    def load(self):
        """Loads and warms the model (on the loader thread); returns the batch function."""
        started = time.perf_counter()
        variants.require_model(self.model_dir)
        precision, path = variants.resolve(self.model_dir, self.precision, runtime=self.runtime)
        model = variants.load(self.model_dir, precision)
        # A SavedModel serves through its signature: tokenizing and the model in one graph call.
        # The int8 model is two calls (TF tokenizes, LiteRT computes), an ONNX copy too
        # (tokenizers, ONNX Runtime): through the module.
        serve = loaded_model.signature(model) if precision in ("float32", "bfloat16") else model
        self.pair = loaded_model.is_pair_model(serve)
        self.explain_refused = self._explain_refusal(loaded_model.task_of(serve))
        self.columns = columns.model_columns(self.model_dir)
        run_batch = functools.partial(protocol.predict_instances, serve, batch_size=self.max_batch_size)
        warm_up = [(text, text) for text in WARM_UP_TEXTS] if self.pair else WARM_UP_TEXTS
        for instance in warm_up:
            run_batch([instance])
        run_batch(warm_up * (self.max_batch_size // len(warm_up) + 1))
        log.info(f"model ready: {precision} ({path}), loaded and warmed up in {time.perf_counter() - started:.1f}s")
        return run_batch

    def _explain_refusal(self, task) -> str | None:
        """Why {"explain": true} is refused (None: the float32 SavedModel explains, loaded at the
        first request that asks, whichever copy predicts)."""
        if not installed.tensorflow():
            return str(installed.without('{"explain": true}'))
        if variants.onnx_copy_alone(self.model_dir):
            return (
                f'{{"explain": true}}: explanations are computed by the float32 SavedModel, and '
                f"--model-dir {self.model_dir} is an ONNX copy on its own; serve its model dir"
            )
        from trainer.explaining import attribute

        return attribute.refusal(task, self.model_dir)

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        loop = asyncio.get_running_loop()
        tasks = []

        def report(run_batch=None, error=None):  # on the event loop
            if error:
                self.error = error
                self.on_failure()
                return
            self._batcher = MicroBatcher(run_batch, self.max_batch_size, self.max_wait, self._executor)
            tasks.append(loop.create_task(self._batcher.run()))

        def load_in_background():
            try:
                loop.call_soon_threadsafe(functools.partial(report, run_batch=self.load()))
            except Exception as e:  # noqa: BLE001  any failure to load ends the server with one line
                loop.call_soon_threadsafe(functools.partial(report, error=load_error(self.model_dir, e)))

        # A daemon thread: a server stopped while TensorFlow is still loading exits at once.
        threading.Thread(target=load_in_background, name="model-loader", daemon=True).start()
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            self._executor.shutdown(wait=False)


def load_error(model_dir: str, error: Exception) -> str:
    if isinstance(error, UserError):
        return str(error)
    first_line = (str(error).strip().splitlines() or [""])[0]
    return f"--model-dir {model_dir}: cannot load the model: {type(error).__name__}: {first_line}"


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def read_body(request: Request, limit: int = protocol.MAX_BODY_BYTES) -> bytes:
    """The body, or a 413 once it passes `limit`. An oversized body is still read (up to 8x the
    limit) so the client, still sending, receives the 413 instead of a reset connection."""
    declared = request.headers.get("content-length", "")
    body, size = bytearray(), 0
    if not (declared.isdigit() and int(declared) > 8 * limit):
        async for chunk in request.stream():
            size += len(chunk)
            if size <= limit:
                body += chunk
            elif size > 8 * limit:
                break
    if size > limit or (declared.isdigit() and int(declared) > limit):
        raise protocol.RequestError(
            413, f"body is larger than {limit:,} bytes (Vertex AI's online prediction limit): split the request"
        )
    return bytes(body)


class AccessLog:
    """An INFO line per request: method, route, status, instances, milliseconds. Vertex probes the
    health route every 10 seconds by default (Probe.period_seconds), so a health check that
    answers 200 is not logged. uvicorn's own access log (off here) knows neither the instance
    count nor the time taken, and writes through its own logger, not the trainer's."""

    def __init__(self, app, health_route: str):
        self.app, self.health_route = app, health_route

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), [500]

        async def sending(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if not (scope["path"] == self.health_route and status[0] == 200):
                instances = scope.get("state", {}).get("instances")
                log.info(
                    "%s %s %d %s %.1f ms",
                    scope["method"],
                    scope["path"],
                    status[0],
                    "-" if instances is None else f"{instances} instances",
                    1000 * (time.perf_counter() - started),
                )


def build_app(
    service: ModelService, env: vertex.ServingEnvironment, max_instances: int, access_log: bool = True
) -> Starlette:
    loading = "the model is still loading; retry when the health route answers 200"

    async def health(request: Request):
        return JSONResponse({"status": "ready"}) if service.ready else error_response(503, loading)

    async def predict(request: Request):
        if not service.ready:
            return error_response(503, loading)
        payload = protocol.parse_json(await read_body(request))
        texts = protocol.read_instances(payload, max_instances, pair=service.pair, columns=service.columns)
        request.state.instances = len(texts)  # for the access line
        if protocol.explain_requested(payload) and service.explain_refused:
            return error_response(400, service.explain_refused)
        try:
            predictions, _ = await service.predict(texts)
            if protocol.explain_requested(payload):
                predictions = [{**p, "explanations": e} for p, e in zip(predictions, await service.explain(texts))]
            return JSONResponse({"predictions": predictions})
        except UserError as e:  # {"explain": true} to a model exported without explain_tokens
            return error_response(400, str(e))
        except Exception as e:  # noqa: BLE001  the model (or its answer) failed; the server goes on
            # Answered here, in JSON: Starlette's own 500 is text/plain, and it re-raises the error
            # for uvicorn to log as a traceback (ServerErrorMiddleware).
            log.error(f"prediction failed: {type(e).__name__}: {e}")
            return error_response(500, f"prediction failed: {type(e).__name__}")

    async def request_error(request: Request, error: protocol.RequestError):
        return error_response(error.status, str(error))

    async def http_error(request: Request, error: HTTPException):
        """Starlette's own 404/405, in the same JSON shape as every other error."""
        routes = f"POST {env.predict_route} or GET {env.health_route}"
        messages = {
            404: f"no route {request.url.path}: this server answers {routes}",
            405: f"{request.method} is not allowed on {request.url.path}: use {routes}",
        }
        return error_response(error.status_code, messages.get(error.status_code, error.detail), error.headers)

    return Starlette(
        routes=[Route(env.health_route, health, methods=["GET"]), Route(env.predict_route, predict, methods=["POST"])],
        exception_handlers={protocol.RequestError: request_error, HTTPException: http_error},
        middleware=[Middleware(AccessLog, health_route=env.health_route)] if access_log else [],
        lifespan=service.lifespan,
    )


def build_arg_parser(env: vertex.ServingEnvironment) -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m trainer.serve", description=__doc__.splitlines()[0], formatter_class=helptext.DefaultsShown
    )
    parser.add_argument(
        "--model-dir",
        default=env.storage_uri,
        required=env.storage_uri is None,
        help="An exported model (JOB_DIR/model), local or gs://. On Vertex AI: $AIP_STORAGE_URI.",
    )
    parser.add_argument(
        "--host",
        default=env.host,
        help="Address to listen on. By default 127.0.0.1 (this machine only), or "
        "0.0.0.0 (all interfaces) when $AIP_HTTP_PORT is set, as in Vertex AI's "
        "container; pass 0.0.0.0 to be reached from other machines.",
    )
    parser.add_argument("--port", type=int, default=env.port, help="Port ($AIP_HTTP_PORT on Vertex AI).")
    parser.add_argument(
        "--max-batch-size",
        type=int,
        default=64,
        help="Most texts of concurrent requests run through the model at once.",
    )
    parser.add_argument(
        "--max-wait-ms",
        type=float,
        default=0.0,
        help="Longest a request waits for others to share its batch. At 0 a batch is what "
        "queued while the model computed the one before (trainer/serving/batching.py).",
    )
    parser.add_argument("--max-instances", type=int, default=512, help="Most instances one request may carry.")
    parser.add_argument(
        "--drain-seconds", type=float, default=25.0, help="On SIGTERM, how long in-flight requests may take to finish."
    )
    predict_file.add_copy_arguments(parser, "serves")
    parser.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="Turn off the access log: by default the server logs a line per "
        "request (method, route, status, instances, ms).",
    )
    return parser


def check_args(args) -> None:
    for flag, value, low in (
        ("--max-batch-size", args.max_batch_size, 1),
        ("--max-instances", args.max_instances, 1),
        ("--max-wait-ms", args.max_wait_ms, 0),
        ("--drain-seconds", args.drain_seconds, 0),
    ):
        if value < low:
            raise UserError(f"{flag}: must be at least {low}, got {value}")
    if not 0 < args.port < 65536:
        raise UserError(f"--port: expected 1-65535, got {args.port}")


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything is printed: a port in use is one `error:`
    line and exit 2, where uvicorn would print its own traceback-like line after ours and exit 3."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY on an accepted connection only when
    # its socket says TCP (python/cpython#148783), and without it each response on a kept-alive
    # connection waits on the client's delayed ACK (56 ms per one-text request here, 13 ms with it).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own bind does
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        hint = (
            "another process listens there; stop it or choose another --port"
            if e.errno == errno.EADDRINUSE
            else "check --host and --port"
        )
        raise UserError(f"--port: cannot listen on {host}:{port}: {e.strerror}; {hint}") from None
    return sock


def main(argv=None, environ: Mapping[str, str] = os.environ) -> int:
    env = vertex.read_serving_environment(environ)
    args = build_arg_parser(env).parse_args(argv)
    check_args(args)
    sock = listening_socket(args.host, args.port)
    cli.setup_logging()
    service = ModelService(
        args.model_dir, args.max_batch_size, args.max_wait_ms / 1000, precision=args.precision, runtime=args.runtime
    )
    config = uvicorn.Config(
        build_app(service, env, args.max_instances, args.access_log),
        host=args.host,
        port=args.port,
        log_config=None,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=args.drain_seconds,
    )
    server = uvicorn.Server(config)
    service.on_failure = lambda: setattr(server, "should_exit", True)
    log.info(
        f"listening on http://{args.host}:{args.port} (GET {env.health_route}, POST {env.predict_route}); "
        f"loading the model from {args.model_dir}"
    )
    # After draining, uvicorn re-raises the signal it stopped on (Server.capture_signals), which
    # would end the process by SIGTERM's default action. A drained stop is a clean exit: the
    # re-raised signal lands in this no-op handler instead.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
    if service.error:
        raise UserError(service.error)
    log.info("stopped")
    return 0
