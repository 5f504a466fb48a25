"""The calls trainer.storage makes of tf.io.gfile, on gs:// paths, through google-cloud-storage:
Cloud Storage where TensorFlow is not installed (the ONNX runtime's environment, `bash
scripts/install.sh onnx`, and its image, Dockerfile.serve-onnx). trainer/local_gfile.py sends
its gs:// paths here, so that `trainer.serve --runtime onnx` reads its model from Vertex AI's
AIP_STORAGE_URI, and `trainer.predict` reads a gs:// --model-dir or --input and uploads its
finished --output.

That is all those two commands do with Cloud Storage, so it is all there is: reading (exists,
isdir, listdir, stat, walk, a file opened to read) and uploading a finished local file. The
model is read from the bucket as TensorFlow's file system reads it, not copied to a local
directory first: ONNX Runtime and tokenizers take the files' contents, so there is no disk to
fill or clean up, and every message names the gs:// path the user gave.

google-cloud-storage rather than gcsfs: Google's own client, already in the TensorFlow images
(google-cloud-aiplatform requires it); in the ONNX image it adds 18 distributions and 37 MB
(16 MB of it google-auth's cryptography), where gcsfs brings 39, google-cloud-storage itself
among them, with aiohttp and grpcio. Credentials are Application Default Credentials, found as
TensorFlow's client finds them (on Vertex AI, the serving container's service account);
STORAGE_EMULATOR_HOST points the client at an emulator, anonymously (the tests').

A failure is one of `errors` (tf.errors' names, so trainer.storage turns it into one line as it
turns TensorFlow's), carrying the service's own message.
"""

import functools
import posixpath
import re
from types import SimpleNamespace

from trainer import installed
from trainer.errors import UserError

SCHEME = "gs://"


class OpError(Exception):
    """tf.errors.OpError's place: a gs:// call that failed; `message` as TensorFlow's has it."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFoundError(OpError):
    pass


class PermissionDeniedError(OpError):
    pass


class UnauthenticatedError(OpError):
    """No credentials, or credentials the service refused (HTTP 401)."""


errors = SimpleNamespace(
    OpError=OpError,
    NotFoundError=NotFoundError,
    PermissionDeniedError=PermissionDeniedError,
    UnauthenticatedError=UnauthenticatedError,
)


def unsupported(path: str) -> UserError:
    """The line for what needs TensorFlow's file system: a path of another scheme (s3://,
    hdfs://), or a gs:// call other than those here."""
    return UserError(
        f"{path}: without TensorFlow (not in this Python), files are read from local "
        f"paths or gs://, and written to local paths or uploaded to gs:// once finished; "
        f"copy the files to a local path first, or install the TensorFlow stack with "
        f"`{installed.INSTALL_TENSORFLOW}`"
    )


def _as_op_error(error: Exception):
    """One of `errors` for an exception of the client libraries, or None for any other."""
    import requests
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    if not isinstance(error, (api.GoogleAPIError, auth.GoogleAuthError, requests.RequestException)):
        return None
    kind = (
        NotFoundError
        if isinstance(error, api.NotFound)
        else PermissionDeniedError
        if isinstance(error, api.Forbidden)
        else UnauthenticatedError
        if isinstance(error, (api.Unauthorized, auth.DefaultCredentialsError, auth.RefreshError))
        else OpError
    )
    said = str(error)
    if isinstance(error, api.GoogleAPICallError):  # the service's message, not the request's URL
        said = f"{re.sub(r'^[A-Z]+ [^ ]+: ', '', error.message)} (HTTP {error.code})"
    return kind((said.strip().splitlines() or [type(error).__name__])[0])


def _cloud_errors(function):
    """The client libraries' exceptions -> `errors`, which trainer.storage explains."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except Exception as error:  # noqa: BLE001  re-raised unless the client library's
            translated = _as_op_error(error)
            if translated is None:
                raise
            raise translated from None

    return wrapper


@functools.cache
def _client():
    from google.cloud import storage

    # project=None: reading and uploading name their bucket; no project is looked up.
    return storage.Client(project=None)


def _split(path: str) -> tuple:
    """gs://BUCKET/NAME -> (BUCKET, NAME)."""
    bucket, _, name = path[len(SCHEME) :].partition("/")
    return bucket, name


def _prefix(name: str) -> str:
    """The object-name prefix of everything in the "directory" `name` ("" for the bucket's root)."""
    return name.rstrip("/") + "/" if name.strip("/") else ""


def _any_under(bucket: str, prefix: str) -> bool:
    return any(True for _ in _client().list_blobs(bucket, prefix=prefix, max_results=1))


@_cloud_errors
def exists(path: str) -> bool:
    """A bucket, an object, or a "directory": a prefix some object's name starts with."""
    bucket, name = _split(path)
    if not name.strip("/"):
        return _client().lookup_bucket(bucket) is not None
    return _client().bucket(bucket).blob(name).exists() or _any_under(bucket, _prefix(name))


@_cloud_errors
def isdir(path: str) -> bool:
    bucket, name = _split(path)
    if not name.strip("/"):
        return _client().lookup_bucket(bucket) is not None
    return _any_under(bucket, _prefix(name))


@_cloud_errors
def listdir(path: str) -> list:
    """The names in a "directory", a subdirectory's with a trailing slash, as TensorFlow's lists."""
    bucket, name = _split(path)
    prefix = _prefix(name)
    listing = _client().list_blobs(bucket, prefix=prefix, delimiter="/")
    files = [blob.name[len(prefix) :] for blob in listing if blob.name != prefix]
    names = files + [sub[len(prefix) :] for sub in listing.prefixes]
    if not names and not exists(path):
        raise NotFoundError("no such directory")
    return sorted(names)


@_cloud_errors
def stat(path: str):
    bucket, name = _split(path)
    blob = _client().bucket(bucket).get_blob(name)
    if blob is None:
        raise NotFoundError("no such object")
    return SimpleNamespace(length=blob.size, mtime_nsec=int(blob.updated.timestamp() * 1e9))


@_cloud_errors
def walk(path: str):
    """(directory, its subdirectories, its files) of `path` and everything under it, top down,
    as os.walk yields them; nothing for a path nothing lies under. Listed at the call (where an
    error is translated), not as the caller iterates."""
    bucket, name = _split(path)
    prefix = _prefix(name)
    tree = {}  # directory relative to `path` ("" for itself) -> (subdirectories, files)
    for blob in _client().list_blobs(bucket, prefix=prefix):
        directory, _, file = blob.name[len(prefix) :].rpartition("/")
        tree.setdefault(directory, (set(), []))[1].extend([file] if file else [])
        while directory:  # every directory above it exists, and holds the one below
            parent, _, child = directory.rpartition("/")
            tree.setdefault(parent, (set(), []))[0].add(child)
            directory = parent
    top = path.rstrip("/")
    return iter(
        [
            ((posixpath.join(top, directory) if directory else top), sorted(subdirectories), sorted(files))
            for directory, (subdirectories, files) in sorted(tree.items())
        ]
    )


@_cloud_errors
def GFile(path: str, mode: str = "r"):  # noqa: N802  tf.io.gfile's name
    """An object opened to read, streamed in chunks: bytes, or text as UTF-8 with line ends as
    written (local_gfile.GFile's). A missing object or a refusal is an error here, not at the
    first read."""
    if set(mode) - set("rbt"):
        raise unsupported(path)
    bucket, name = _split(path)
    blob = _client().bucket(bucket).blob(name)
    blob.reload()
    return blob.open("rb") if "b" in mode else blob.open("rt", encoding="utf-8", newline="")


@_cloud_errors
def upload(source: str, target: str) -> None:
    """A finished local file to gs://`target`: an object appears whole when its upload ends."""
    bucket, name = _split(target)
    _client().bucket(bucket).blob(name).upload_from_filename(source)
