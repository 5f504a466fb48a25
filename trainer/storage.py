"""File access for local paths and gs:// alike (tf.io.gfile), with atomic writes.

A reader never sees half a file: every write goes to a temporary name in the same directory
and is renamed into place. On GCS an object appears whole when its upload finishes, and
rename is copy-then-delete, which is still all-or-nothing for the final name.
"""
import os
import uuid

import trainer
from trainer.errors import UserError



def _tf():
    """TensorFlow, imported on first use: entry points answer --help without loading it."""
    return trainer.import_tensorflow()


def join(base: str, name: str) -> str:
    """`base`/`name`, for local paths and gs:// URLs alike: the one way paths are joined here."""
    return base.rstrip("/") + "/" + name


def exists(path: str) -> bool:
    return _tf().io.gfile.exists(path)


def isdir(path: str) -> bool:
    return _tf().io.gfile.isdir(path)


def remove(path: str) -> None:
    """Deletes a file, or a directory with everything in it."""
    if _tf().io.gfile.isdir(path):
        _tf().io.gfile.rmtree(path)
    else:
        _tf().io.gfile.remove(path)


def makedirs(path: str) -> None:
    _tf().io.gfile.makedirs(path)


def read_text(path: str) -> str:
    with _tf().io.gfile.GFile(path, "r") as f:
        return f.read()


def read_bytes(path: str) -> bytes:
    with _tf().io.gfile.GFile(path, "rb") as f:
        return f.read()


def copy(source: str, target: str) -> None:
    _tf().io.gfile.copy(source, target, overwrite=True)


def _temporary_name(path: str) -> str:
    head, tail = os.path.split(path.rstrip("/"))
    return os.path.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:8]}")


def write_bytes_atomic(path: str, data: bytes) -> None:
    parent = os.path.dirname(path)
    if parent:
        _tf().io.gfile.makedirs(parent)
    tmp = _temporary_name(path)
    with _tf().io.gfile.GFile(tmp, "wb") as f:
        f.write(data)
    _tf().io.gfile.rename(tmp, path, overwrite=True)


def write_text_atomic(path: str, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def _is_object_store(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _files_top_level_last(root: str) -> list:
    """Paths of every file under `root`, relative to it: nested ones first, top-level ones last."""
    root = root.rstrip("/")
    nested, top = [], []
    for directory, _, files in _tf().io.gfile.walk(root):
        relative_dir = directory.rstrip("/")[len(root):].strip("/")
        for name in files:
            (nested if relative_dir else top).append(f"{relative_dir}/{name}" if relative_dir else name)
    return sorted(nested) + sorted(top)


def replace_directory(tmp_dir: str, final_dir: str) -> None:
    """Move a fully written directory into place, replacing what was there.

    Locally that is one rename. An object store (gs://) has no directories: renaming one is a
    copy and a delete per object, in name order, so a reader could find model/saved_model.pb
    before model/variables/ has arrived (or, after a crash, never arrives). There the top-level
    files (a SavedModel's saved_model.pb, the file readers open first) are removed first and
    moved in last: whenever one exists, everything under it is complete.
    """
    if not _is_object_store(final_dir):
        if _tf().io.gfile.exists(final_dir):
            _tf().io.gfile.rmtree(final_dir)
        _tf().io.gfile.rename(tmp_dir, final_dir, overwrite=True)
        return
    if _tf().io.gfile.exists(final_dir):
        for relative in reversed(_files_top_level_last(final_dir)):
            _tf().io.gfile.remove(join(final_dir, relative))
        if _tf().io.gfile.exists(final_dir):
            _tf().io.gfile.rmtree(final_dir)  # directory markers
    for relative in _files_top_level_last(tmp_dir):
        _tf().io.gfile.rename(join(tmp_dir, relative), join(final_dir, relative),
                           overwrite=True)
    if _tf().io.gfile.exists(tmp_dir):
        _tf().io.gfile.rmtree(tmp_dir)  # directory markers


def temporary_sibling(path: str) -> str:
    """A fresh name next to `path` for writing a directory before `replace_directory`."""
    return _temporary_name(path)


def expand_paths(spec: str, flag: str) -> list:
    """'a.csv,b.csv' or 'data/*.csv' (local or gs://) -> sorted existing paths, or a clear error."""
    paths = []
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        if any(ch in part for ch in "*?["):
            try:
                matches = sorted(m for m in _tf().io.gfile.glob(part) if not _tf().io.gfile.isdir(m))
            except _tf().errors.OpError as e:
                raise UserError(f"{flag}: cannot list {part}: {e.message}") from None
            if not matches:
                raise UserError(f"{flag}: no file matches {part}")
            paths.extend(matches)
        else:
            try:
                found = _tf().io.gfile.exists(part)
            except _tf().errors.OpError as e:
                raise UserError(f"{flag}: cannot reach {part}: {e.message}") from None
            if not found:
                raise UserError(f"{flag}: file not found: {part}")
            if _tf().io.gfile.isdir(part):
                raise UserError(f"{flag}: {part} is a directory; give files or a glob like {part.rstrip('/')}/*.csv")
            paths.append(part)
    if not paths:
        raise UserError(f"{flag}: no file given")
    return paths
