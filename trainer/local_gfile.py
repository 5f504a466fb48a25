"""The calls trainer.storage makes of tf.io.gfile, on the local file system: storage's file
access in an environment without TensorFlow (the ONNX runtime's, `bash scripts/install.sh
onnx`). Storage reaches it where it would reach TensorFlow (`_tf()`), so both answer alike for
a local path; a gs:// path is one line naming what reads Cloud Storage.
"""
import glob as globbing
import os
import shutil
from types import SimpleNamespace

from trainer import installed
from trainer.errors import UserError


class OpError(Exception):
    """tf.errors.OpError's place: never raised, as a local path fails with OSError here."""


def _local(path: str) -> str:
    if "://" in path:
        raise UserError(f"{path}: Cloud Storage is read through TensorFlow's file system, which this "
                        f"Python does not have; copy the files to a local path first (gcloud storage "
                        f"cp --recursive), or install the TensorFlow stack with "
                        f"`{installed.INSTALL_TENSORFLOW}`")
    return path


def exists(path: str) -> bool:
    return os.path.exists(_local(path))


def isdir(path: str) -> bool:
    return os.path.isdir(_local(path))


def listdir(path: str) -> list:
    return os.listdir(_local(path))


def stat(path: str):
    found = os.stat(_local(path))
    return SimpleNamespace(length=found.st_size, mtime_nsec=found.st_mtime_ns)


def walk(path: str):
    return os.walk(_local(path))


def glob(pattern: str) -> list:
    return sorted(globbing.glob(_local(pattern)))


def makedirs(path: str) -> None:
    os.makedirs(_local(path), exist_ok=True)


def remove(path: str) -> None:
    os.remove(_local(path))


def rmtree(path: str) -> None:
    shutil.rmtree(_local(path))


def copy(source: str, target: str, overwrite: bool = False) -> None:
    if not overwrite and exists(target):
        raise FileExistsError(f"{target} exists")
    shutil.copyfile(_local(source), _local(target))


def rename(source: str, target: str, overwrite: bool = False) -> None:
    if not overwrite and exists(target):
        raise FileExistsError(f"{target} exists")
    os.replace(_local(source), _local(target))


def GFile(path: str, mode: str = "r"):  # noqa: N802  tf.io.gfile's name
    """A file as tf.io.gfile opens one: text as UTF-8, line ends as written."""
    if "b" in mode:
        return open(_local(path), mode)
    return open(_local(path), mode, encoding="utf-8", newline="")


io = SimpleNamespace(gfile=SimpleNamespace(
    exists=exists, isdir=isdir, listdir=listdir, stat=stat, walk=walk, glob=glob, makedirs=makedirs,
    remove=remove, rmtree=rmtree, copy=copy, rename=rename, GFile=GFile))
errors = SimpleNamespace(OpError=OpError, NotFoundError=OpError, PermissionDeniedError=OpError)
