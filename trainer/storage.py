"""File access for local paths and gs:// alike, with atomic writes: local files through Python's
own calls (trainer/local_gfile.py), gs:// through tf.io.gfile where TensorFlow is installed and
else google-cloud-storage (trainer/gcs_gfile.py, by local_gfile).

A reader never sees half a file: every write goes to a temporary name in the same directory
and is renamed into place. On GCS an object appears whole when its upload finishes, and
rename is copy-then-delete, which is still all-or-nothing for the final name.
"""

import functools
import os
import re
import uuid

import trainer
from trainer import installed, local_gfile
from trainer.errors import UserError


def _system(path: str):
    """What reads `path`, called as tf.io.gfile is (`.io.gfile`, `.errors`): TensorFlow, imported
    on first use, for a path on another file system (gs://) where it is installed; else
    trainer/local_gfile.py. Local files never need TensorFlow: a command that reads only them
    (trainer.predict with an ONNX copy) starts without importing it, 5 s sooner."""
    return trainer.import_tensorflow() if "://" in path and installed.tensorflow() else local_gfile


def join(base: str, name: str) -> str:
    """`base`/`name`, for local paths and gs:// URLs alike: the one way paths are joined here."""
    return base.rstrip("/") + "/" + name


# --------------------------------------------------------------------------- Cloud Storage errors
# TensorFlow's GCS client reports HTTP and libcurl failures as tf.errors.* whose text is the raw
# request log ("All 10 retry attempts failed ... libcurl code 6 meaning 'Could not resolve host'").
# Each is translated here, once, into a line naming the path and what to do about it.

_UNREACHABLE = re.compile(
    r"libcurl code|Could not resolve|Could not connect|timed out|Timeout|"
    r"Connection refused|SSL",
    re.IGNORECASE,
)


def _bucket(path: str) -> str:
    return "gs://" + path[len("gs://") :].split("/", 1)[0]


def explain(path: str, error: Exception) -> str:
    """One line for a failed gs:// access: what went wrong and what to do."""
    tf = _system(path)
    message = getattr(error, "message", str(error))
    first = message.strip().splitlines()[0] if message.strip() else type(error).__name__
    if (
        isinstance(error, tf.errors.UnauthenticatedError)
        or "response code 401" in message
        or "Anonymous caller" in message
        or "bearer token" in message
    ):
        return (
            f"{path}: no Google Cloud credentials for Cloud Storage; run `gcloud auth "
            f"application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS to a service-"
            f"account key file) and retry"
        )
    if isinstance(error, tf.errors.PermissionDeniedError) or "response code 403" in message:
        return (
            f"{path}: permission denied; grant the account you run as read access "
            f"(roles/storage.objectViewer) or, to write there, roles/storage.objectAdmin on "
            f"{_bucket(path)}, or use a bucket it can access"
        )
    if _UNREACHABLE.search(message):
        detail = re.search(r"meaning '([^']+)'", message)
        return (
            f"{path}: cannot reach Cloud Storage ({detail.group(1) if detail else first}); "
            f"check the network connection and any https_proxy setting, then retry"
        )
    if isinstance(error, tf.errors.NotFoundError) and not _bucket_exists(path):
        return _missing_bucket(path)
    return f"{path}: {first}"


def _missing_bucket(path: str) -> str:
    return (
        f"{path}: bucket {_bucket(path)} does not exist or this account cannot see it; create it "
        f"(gcloud storage buckets create {_bucket(path)}) or fix the path"
    )


def _bucket_exists(path: str) -> bool:
    return _bucket_found(_bucket(path))


@functools.cache
def _bucket_found(bucket: str) -> bool:
    try:
        return _system(bucket).io.gfile.exists(bucket + "/")
    except _system(bucket).errors.OpError:
        return True  # the caller reports its own error instead


def require_bucket(path: str) -> None:
    """Before the first write under gs://BUCKET: a missing bucket named as such (TensorFlow's
    client would otherwise retry the upload until it times out)."""
    if path.startswith("gs://") and not _bucket_exists(path):
        raise UserError(_missing_bucket(path))


def _cloud_errors(function):
    """tf.errors from a gs:// path -> UserError(explain(...)); local errors pass unchanged."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except Exception as error:
            cloud = [a for a in args if isinstance(a, str) and a.startswith("gs://")]
            if not cloud or not isinstance(error, _system(cloud[0]).errors.OpError):
                raise
            named = re.search(r"gs://\S+", getattr(error, "message", ""))
            path = next((p for p in cloud if named and named.group(0).startswith(p)), cloud[0])
            raise UserError(explain(path, error)) from None

    return wrapper


# --------------------------------------------------------------------------- file access


@_cloud_errors
def exists(path: str) -> bool:
    return _system(path).io.gfile.exists(path)


@_cloud_errors
def isdir(path: str) -> bool:
    return _system(path).io.gfile.isdir(path)


@_cloud_errors
def listdir(path: str) -> list:
    return _system(path).io.gfile.listdir(path)


@_cloud_errors
def tree_size(path: str) -> int:
    """Bytes of a file, or of every file under a directory (0 if there is nothing)."""
    gfile = _system(path).io.gfile
    if not gfile.exists(path):
        return 0
    if not gfile.isdir(path):
        return gfile.stat(path).length
    return sum(gfile.stat(join(directory, name)).length for directory, _, files in gfile.walk(path) for name in files)


@_cloud_errors
def identity(path: str) -> tuple:
    """(bytes, modification time in ns) of a file: what says it changed, without reading it."""
    stat = _system(path).io.gfile.stat(path)
    return stat.length, stat.mtime_nsec


@_cloud_errors
def remove(path: str) -> None:
    """Deletes a file, or a directory with everything in it."""
    gfile = _system(path).io.gfile
    if gfile.isdir(path):
        gfile.rmtree(path)
    else:
        gfile.remove(path)


def makedirs(path: str) -> None:
    require_bucket(path)
    _system(path).io.gfile.makedirs(path)


@_cloud_errors
def read_text(path: str) -> str:
    with _system(path).io.gfile.GFile(path, "r") as f:
        return f.read()


@_cloud_errors
def read_bytes(path: str) -> bytes:
    with _system(path).io.gfile.GFile(path, "rb") as f:
        return f.read()


def open_binary(path: str):
    """A file opened for reading bytes: the builtin `open` for local paths (fast line
    iteration), gfile for gs:// and other file systems."""
    if "://" not in path:
        try:
            return open(path, "rb", buffering=1 << 20)
        except OSError as e:
            raise UserError(f"cannot read {path}: {e.strerror}") from None
    return _cloud_errors(lambda p: _system(p).io.gfile.GFile(p, "rb"))(path)


@_cloud_errors
def copy(source: str, target: str) -> None:
    require_bucket(target)
    _system(target if "://" in target else source).io.gfile.copy(source, target, overwrite=True)


def _temporary_name(path: str) -> str:
    head, tail = os.path.split(path.rstrip("/"))
    return os.path.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:8]}")


@_cloud_errors
def write_bytes_atomic(path: str, data: bytes) -> None:
    require_bucket(path)
    gfile = _system(path).io.gfile
    parent = os.path.dirname(path)
    if parent:
        gfile.makedirs(parent)
    tmp = _temporary_name(path)
    with gfile.GFile(tmp, "wb") as f:
        f.write(data)
    gfile.rename(tmp, path, overwrite=True)


def write_text_atomic(path: str, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def _umask() -> int:
    """The process's umask (reading it means setting it: set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_local_file(tmp: str, path: str) -> None:
    """Moves a finished local temporary file (tempfile's, mode 0600) to `path` (local or gs://)
    with the mode a newly created file gets (0644 under umask 022), as every other artifact."""
    if "://" in path:
        copy(tmp, path)
        os.unlink(tmp)
        return
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)


def _is_object_store(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _files_top_level_last(root: str) -> list:
    """Paths of every file under `root`, relative to it: nested ones first, top-level ones last."""
    root = root.rstrip("/")
    nested, top = [], []
    for directory, _, files in _system(root).io.gfile.walk(root):
        relative_dir = directory.rstrip("/")[len(root) :].strip("/")
        for name in files:
            (nested if relative_dir else top).append(f"{relative_dir}/{name}" if relative_dir else name)
    return sorted(nested) + sorted(top)


@_cloud_errors
def replace_directory(tmp_dir: str, final_dir: str, marker: str = None) -> None:
    """Move a fully written directory into place, replacing what was there.

    Locally that is one rename. An object store (gs://) has no directories: renaming one is a
    copy and a delete per object, in name order, so a reader could find model/saved_model.pb
    before model/variables/ has arrived (or, after a crash, never arrives). There the top-level
    files (a SavedModel's saved_model.pb, the file readers open first) are removed first and
    moved in last: whenever one exists, everything under it is complete. `marker`, a top-level
    file naming the directory as this package's (trainer.serving.model_dir), is removed last and
    moved in first: a replacement cut short leaves a directory still known to be ours.
    """
    gfile = _system(final_dir).io.gfile
    if not _is_object_store(final_dir):
        if gfile.exists(final_dir):
            gfile.rmtree(final_dir)
        gfile.rename(tmp_dir, final_dir, overwrite=True)
        return
    if gfile.exists(final_dir):
        for relative in _marker_at(list(reversed(_files_top_level_last(final_dir))), marker, last=True):
            gfile.remove(join(final_dir, relative))
        if gfile.exists(final_dir):
            gfile.rmtree(final_dir)  # directory markers
    for relative in _marker_at(_files_top_level_last(tmp_dir), marker, last=False):
        gfile.rename(join(tmp_dir, relative), join(final_dir, relative), overwrite=True)
    if gfile.exists(tmp_dir):
        gfile.rmtree(tmp_dir)  # directory markers


def _marker_at(files: list, marker, last: bool) -> list:
    """`files` with `marker` (when among them) moved to the end, or to the front."""
    if marker not in files:
        return files
    rest = [name for name in files if name != marker]
    return rest + [marker] if last else [marker] + rest


def normalized(path: str) -> str:
    """A path as compared with another: gs:// without a trailing slash, a local one absolute
    with its symbolic links resolved."""
    if "://" in path:
        return path.rstrip("/")
    return os.path.realpath(path)


def is_within(path: str, parent: str) -> bool:
    """Whether `path` is `parent` or lies under it (paths only: nothing is read)."""
    path, parent = normalized(path), normalized(parent)
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def temporary_sibling(path: str) -> str:
    """A fresh name next to `path` for writing a directory before `replace_directory`."""
    return _temporary_name(path)


def expand_paths(spec: str, flag: str) -> list:
    """'a.csv,b.csv' or 'data/*.csv' (local or gs://) -> sorted existing paths, or a clear error."""
    paths = []
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        try:
            paths.extend(_expand(part, flag))
        except UserError as e:
            raise UserError(f"{flag}: {e}") from None
    if not paths:
        raise UserError(f"{flag}: no file given")
    return paths


def _expand(part: str, flag: str) -> list:
    tf = _system(part)
    try:
        if any(ch in part for ch in "*?["):
            matches = sorted(m for m in tf.io.gfile.glob(part) if not tf.io.gfile.isdir(m))
            if not matches:
                require_bucket(part)
                raise UserError(f"no file matches {part}")
            return matches
        if not tf.io.gfile.exists(part):
            require_bucket(part)
            raise UserError(f"file not found: {part}")
        if tf.io.gfile.isdir(part):
            raise UserError(f"{part} is a directory; give files or a glob like {part.rstrip('/')}/*.csv")
        return [part]
    except (OSError, tf.errors.OpError) as e:
        if not part.startswith("gs://"):
            raise UserError(f"cannot read {part}: {getattr(e, 'message', None) or e.strerror}") from None
        raise UserError(explain(part, e)) from None
