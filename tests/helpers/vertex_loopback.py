"""A Vertex AI API on 127.0.0.1, for tests that run the real google-cloud-aiplatform SDK.

The SDK's REST transport accepts an `http://` endpoint (aiplatform_v1's rest_base keeps a scheme
given in the host), so `aiplatform.init(api_endpoint="http://127.0.0.1:PORT",
api_transport="rest", credentials=AnonymousCredentials())` sends every request here, built by
the SDK itself. The server behaves like a generic resource store with Vertex's shapes:

- POST PARENT/COLLECTION[?xId=ID]  creates a resource (name PARENT/COLLECTION/ID, or a number)
- GET NAME                         the stored resource, else 404 NOT_FOUND
- GET PARENT/COLLECTION            lists the stored children, as {"COLLECTION": [...]}
- PATCH NAME                       merges the body into the stored resource
- POST NAME:VERB                   Vertex's custom methods (upload, deployModel, write, ...)
- DELETE NAME                      removes it

Long-running methods (LONG_RUNNING) answer with an Operation that is already done, so the SDK
never polls. A model upload with parent_model becomes the next version of that model; a
deployModel adds a DeployedModel to the endpoint and applies the request's traffic_split.

API for tests (also used by the pipeline's tests):

    with VertexLoopback() as server:               # VertexLoopback(fail=True): every answer is 500
        server.put("projects/p/locations/us-central1/endpoints/9", {...})   # seed a resource
        with server.pointed_at(project="p", location="us-central1"):
            ...                                     # aiplatform / aiplatform_v1 calls go here
        server.requests                             # [Request(method, path, query, body)], in order
        server.find("POST", ":deployModel")         # the requests whose path ends with this
        server.resources[name]                      # what the server holds now

`pointed_at` configures aiplatform's global config and restores a fresh one afterwards (it also
forgets any current experiment run), so a test leaves no state behind for the next.
"""

import contextlib
import dataclasses
import http.server
import json
import re
import threading
import urllib.parse

V1 = "type.googleapis.com/google.cloud.aiplatform.v1."
# (HTTP method, path pattern) -> the type of the response an Operation carries when done.
LONG_RUNNING = [
    ("POST", r"/models:upload$", "UploadModelResponse"),
    ("POST", r":deployModel$", "DeployModelResponse"),
    ("POST", r":undeployModel$", "UndeployModelResponse"),
    ("POST", r"/endpoints$", "Endpoint"),
    ("POST", r"/tensorboards$", "Tensorboard"),
    ("POST", r"/metadataStores$", "MetadataStore"),
    ("DELETE", r".*", None),
]
_VERSION = re.compile(r"^(?P<name>.+?)@(?P<version>[^/@]+)$")


@dataclasses.dataclass
class Request:
    method: str
    path: str  # without /v1/, e.g. projects/p/locations/l/models:upload
    query: dict  # {parameter: value}
    body: dict | None


class VertexLoopback:
    """A ThreadingHTTPServer on 127.0.0.1 (any free port) in a daemon thread; see the module."""

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.requests: list[Request] = []
        self.resources: dict[str, dict] = {}
        self._ids = 0
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def put(self, name: str, resource: dict) -> None:
        self.resources[name] = {**resource, "name": name}

    def find(self, method: str, path_end: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and r.path.endswith(path_end)]

    @contextlib.contextmanager
    def pointed_at(self, project: str = "my-project", location: str = "us-central1"):
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import aiplatform
        from google.cloud.aiplatform import initializer
        from google.cloud.aiplatform.metadata import metadata

        aiplatform.init(
            project=project,
            location=location,
            api_endpoint=self.url,
            api_transport="rest",
            credentials=AnonymousCredentials(),
        )
        try:
            yield self
        finally:
            initializer.global_config.__init__()
            metadata._experiment_tracker.__init__()

    # The server side: one call per request, under the lock.

    def answer(self, method: str, path: str, query: dict, body: dict | None) -> tuple:
        with self._lock:
            self.requests.append(Request(method, path, query, body))
            if self.fail:
                return 500, _error(500, "INTERNAL", "the loopback server fails on purpose")
            result = self._route(method, path, query, body or {})
            if result[0] != 200:
                return result
            kind = next((t for m, pattern, t in LONG_RUNNING if m == method and re.search(pattern, path)), False)
            if kind is False:
                return result
            self._ids += 1
            done = {"name": f"{path.split(':')[0]}/operations/{self._ids}", "done": True}
            return 200, {**done, "response": {"@type": V1 + kind, **result[1]}} if kind else done

    def _route(self, method, path, query, body) -> tuple:
        if ":" in path.rsplit("/", 1)[-1]:
            name, verb = path.rsplit(":", 1)
            return self._custom(method, name, verb, body)
        if method == "POST":
            return self._create(path, query, body)
        name = _VERSION.sub(r"\g<name>", path)
        if method == "GET" and name not in self.resources and len(path.split("/")) % 2 == 1:
            field = path.rsplit("/", 1)[-1]
            return 200, {
                field: [
                    r for n, r in self.resources.items() if n.rsplit("/", 2)[0] == path and n.rsplit("/", 2)[1] == field
                ]
            }
        if name not in self.resources:
            return 404, _error(404, "NOT_FOUND", f"{path} not found")
        if method == "PATCH":
            self.resources[name].update(body)
        if method == "DELETE":
            del self.resources[name]
            return 200, {}
        return 200, self.resources[name]

    def _create(self, collection: str, query: dict, body: dict) -> tuple:
        given = next((v for k, v in query.items() if k.endswith("Id") and v), None)
        self._ids += 1
        name = f"{collection}/{given or self._ids}"
        if name in self.resources:
            return 409, _error(409, "ALREADY_EXISTS", f"{name} already exists")
        self.put(name, body)
        return 200, self.resources[name]

    def _custom(self, method: str, name: str, verb: str, body: dict) -> tuple:
        if verb == "upload":
            return 200, self._upload(name, body)
        if verb == "deployModel":
            return self._deploy(name, body)
        if verb == "mergeVersionAliases":
            model, _, version = name.partition("@")
            if model not in self.resources:
                return 404, _error(404, "NOT_FOUND", f"{model} not found")
            aliases = self.resources[model].setdefault("versionAliases", {})
            for alias in body.get("versionAliases", []):
                for v, held in aliases.items():
                    aliases[v] = [a for a in held if a != alias.lstrip("-")]
                if not alias.startswith("-"):
                    aliases.setdefault(version, []).append(alias)
            return 200, {**self.resources[model], "versionId": version, "versionAliases": aliases[version]}
        return 200, {}  # e.g. addContextArtifactsAndExecutions, write, batchCreate: accepted

    def _upload(self, parent: str, body: dict) -> dict:
        parent_model = body.get("parentModel")
        if parent_model in self.resources:
            model = self.resources[parent_model]
            model["versionCount"] = model.get("versionCount", 1) + 1
            return {"model": parent_model, "modelVersionId": str(model["versionCount"])}
        self._ids += 1
        name = f"{parent}/models/{self._ids}"
        self.put(name, {**body.get("model", {}), "versionCount": 1})
        return {"model": name, "modelVersionId": "1"}

    def _deploy(self, endpoint_name: str, body: dict) -> tuple:
        endpoint = self.resources.get(endpoint_name)
        if endpoint is None:
            return 404, _error(404, "NOT_FOUND", f"{endpoint_name} not found")
        self._ids += 1
        deployed = {**body.get("deployedModel", {}), "id": str(self._ids)}
        # Vertex keeps a versioned deployment's model name bare, its version beside it.
        model, _, version = deployed.get("model", "").partition("@")
        if version.isdigit():
            deployed.update(model=model, modelVersionId=version)
        endpoint.setdefault("deployedModels", []).append(deployed)
        split = body.get("trafficSplit", {})
        endpoint["trafficSplit"] = {
            (deployed["id"] if key == "0" else key): value for key, value in split.items() if value
        }
        return 200, {"deployedModel": deployed}


def _error(code: int, status: str, message: str) -> dict:
    return {"error": {"code": code, "message": message, "status": status}}


def _handler(server: VertexLoopback):
    class Handler(http.server.BaseHTTPRequestHandler):
        def _serve(self):
            url = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw.strip() else None
            query = dict(urllib.parse.parse_qsl(url.query))
            path = urllib.parse.unquote(url.path).removeprefix("/v1/")
            status, payload = server.answer(self.command, path, query, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

        def log_message(self, *args):  # the test's output stays the test's
            pass

    return Handler
