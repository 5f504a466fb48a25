"""A stand-in Hugging Face Hub on 127.0.0.1, and tiny BERT/ELECTRA repositories to serve.

The server speaks the part of the Hub API huggingface_hub 2.x calls for `model_info` and
`snapshot_download` (read in its hf_api.py, _snapshot_download.py and file_download.py):
  GET  /api/models/ORG/NAME[/revision/REV] -> {"id", "sha", "siblings": [{"rfilename"}]}
  GET  /api/models/ORG/NAME/tree/COMMIT   -> [{"type": "file", "path", "size", "oid"}]
  HEAD /ORG/NAME/resolve/REV/FILE         -> X-Repo-Commit, ETag, Content-Length
  GET  /ORG/NAME/resolve/REV/FILE         -> the bytes
Errors carry X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo), which
huggingface_hub turns into its typed errors. Every request is recorded, for tests that count.
"""

import dataclasses
import hashlib
import http.server
import io
import json
import os
import threading
import urllib.parse

import numpy as np
import tiny_bert

HIDDEN = 32
BERT_CONFIG = {**tiny_bert.CONFIG, "hidden_size": HIDDEN, "intermediate_size": 64}
ELECTRA_CONFIG = {
    **BERT_CONFIG,
    "architectures": ["ElectraForPreTraining"],
    "model_type": "electra",
    "embedding_size": 16,
}


def electra_weights(seed=0) -> dict[str, np.ndarray]:
    """ElectraForPreTraining tensors: 16-wide embeddings, a 16 -> 32 projection, BERT blocks,
    no pooler, and the discriminator head a loader must skip."""
    head = np.random.default_rng(seed + 100).standard_normal((2, HIDDEN, HIDDEN)).astype(np.float32)
    return {
        **{f"electra.{name}": value for name, value in tiny_bert.hf_weights(ELECTRA_CONFIG, seed).items()},
        "discriminator_predictions.dense.weight": 0.2 * head[0],
        "discriminator_predictions.dense_prediction.weight": 0.2 * head[1, :1],
    }


def bert_weights(seed=0) -> dict[str, np.ndarray]:
    return tiny_bert.hf_weights(BERT_CONFIG, seed)


def _tf_name(torch_name: str) -> tuple[str, bool]:
    """Transformers' TF variable name of a PyTorch tensor, and whether it is a Linear weight
    (a Keras kernel is its transpose)."""
    *module, leaf = torch_name.split(".")
    path = "/".join(module).replace("layer/", "layer_._")
    if module[-1].endswith("_embeddings") and module[-1] != "word_embeddings":
        return f"{path}/embeddings:0", False
    if module[-1] == "word_embeddings":
        return f"{path}/weight:0", False
    if module[-1] == "LayerNorm":
        return f"{path}/{'gamma' if leaf == 'weight' else 'beta'}:0", False
    return f"{path}/{'kernel' if leaf == 'weight' else 'bias'}:0", leaf == "weight"


def h5_bytes(weights: dict[str, np.ndarray], model_class: str) -> bytes:
    """`weights` (task-model PyTorch names: "electra.embeddings...", "discriminator_predictions...")
    as Transformers' tf_model.h5, the Keras 2 save_weights layout: a group per top-level layer,
    datasets named LAYER/MODEL_CLASS/LAYER/.../kernel:0, Keras kernels [in, out]."""
    import h5py

    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        f.attrs["layer_names"] = sorted({name.split(".")[0].encode() for name in weights})
        for name, value in weights.items():
            layer, _, inner = name.partition(".")
            tf_name, transpose = _tf_name(inner)
            f.create_dataset(f"{layer}/{model_class}/{layer}/{tf_name}", data=value.T if transpose else value)
    return buffer.getvalue()


def safetensors_bytes(weights: dict[str, np.ndarray]) -> bytes:
    from safetensors.numpy import save

    return save(weights)


def checkpoint_files(config: dict, weights_name: str, weights_bytes: bytes) -> dict[str, bytes]:
    vocab = ("\n".join(tiny_bert.VOCAB) + "\n").encode()
    return {
        "config.json": json.dumps(config).encode(),
        "vocab.txt": vocab,
        "tokenizer_config.json": b'{"do_lower_case": true}',
        "README.md": b"# tiny\n",
        weights_name: weights_bytes,
    }


def write_directory(directory, files: dict[str, bytes]) -> str:
    os.makedirs(directory, exist_ok=True)
    for name, content in files.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(content)
    return str(directory)


@dataclasses.dataclass
class Repo:
    commits: dict[str, dict[str, bytes]]  # commit sha -> {path: content}
    refs: dict[str, str]  # branch or tag -> commit sha ("main" is the default branch)
    token: str | None = None  # gated: only this bearer token reads it

    def commit_of(self, revision: str) -> str | None:
        return revision if revision in self.commits else self.refs.get(revision)


def commit_sha(label: str) -> str:
    return hashlib.sha1(label.encode()).hexdigest()


class StandInHub:
    """A threaded HTTP server; `requests` lists (method, path) of everything it was asked."""

    def __init__(self, repos: dict[str, Repo]):
        self.repos = repos
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hub._answer(self, body=True)

            def do_HEAD(self):
                hub._answer(self, body=False)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def file_requests(self, name: str) -> list[tuple[str, str]]:
        return [(method, path) for method, path in self.requests if "/resolve/" in path and path.endswith("/" + name)]

    def _answer(self, handler, body: bool):
        path = urllib.parse.urlsplit(handler.path).path
        self.requests.append((handler.command, path))
        parts = path.strip("/").split("/")
        api = parts[:2] == ["api", "models"]
        repo_id = "/".join(parts[2:4] if api else parts[0:2])
        repo = self.repos.get(repo_id)
        if repo is None:
            return _send(handler, 404, b"", {"X-Error-Code": "RepoNotFound"}, body)
        if repo.token and handler.headers.get("Authorization") != f"Bearer {repo.token}":
            return _send(handler, 401, b"", {"X-Error-Code": "GatedRepo"}, body)
        # model_info without a revision asks /api/models/ORG/NAME: the default branch.
        kind, revision, *rest = (parts[4:] or ["revision", "main"]) if api else parts[2:]
        commit = repo.commit_of(urllib.parse.unquote(revision))
        if commit is None:
            return _send(handler, 404, b"", {"X-Error-Code": "RevisionNotFound"}, body)
        files = repo.commits[commit]
        if api and kind == "revision":
            info = {
                "id": repo_id,
                "sha": commit,
                "private": bool(repo.token),
                "siblings": [{"rfilename": name} for name in sorted(files)],
            }
            return _send(handler, 200, json.dumps(info).encode(), {}, body)
        if api and kind == "tree":
            tree = [
                {"type": "file", "path": name, "size": len(content), "oid": hashlib.sha1(content).hexdigest()}
                for name, content in sorted(files.items())
            ]
            return _send(handler, 200, json.dumps(tree).encode(), {}, body)
        name = urllib.parse.unquote("/".join(rest))
        if kind != "resolve" or name not in files:
            return _send(handler, 404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}, body)
        content = files[name]
        return _send(
            handler, 200, content, {"X-Repo-Commit": commit, "ETag": f'"{hashlib.sha256(content).hexdigest()}"'}, body
        )


def _send(handler, status: int, content: bytes, headers: dict[str, str], body: bool):
    handler.send_response(status)
    for key, value in {**headers, "Content-Length": str(len(content))}.items():
        handler.send_header(key, value)
    handler.end_headers()
    if body:
        handler.wfile.write(content)
