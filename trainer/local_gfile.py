"""The calls trainer.storage makes of tf.io.gfile, on the local file system: storage's access to
every local file, and to gs:// in an environment without TensorFlow (the ONNX runtime's, `bash
scripts/install.sh onnx`). It answers as tf.io.gfile does for a local path; a gs:// path is
read, or a finished file uploaded, through google-cloud-storage (trainer/gcs_gfile.py), and
anything else there is one line naming what does it.
"""

import functools
import glob as globbing
import os
import shutil
from types import SimpleNamespace

from trainer import gcs_gfile


def _local(path: str) -> str:
    if "://" in path:
        raise gcs_gfile.unsupported(path)
    return path


def _or_cloud(local_call):
    """`local_call`, or for a gs:// path gcs_gfile's call of the same name."""
    cloud_call = getattr(gcs_gfile, local_call.__name__)

    @functools.wraps(local_call)
    def call(path: str, *args, **kwargs):
        return (cloud_call if path.startswith(gcs_gfile.SCHEME) else local_call)(path, *args, **kwargs)

    return call


@_or_cloud
def exists(path: str) -> bool:
    return os.path.exists(_local(path))


@_or_cloud
def isdir(path: str) -> bool:
    return os.path.isdir(_local(path))


@_or_cloud
def listdir(path: str) -> list:
    return os.listdir(_local(path))


@_or_cloud
def stat(path: str):
    found = os.stat(_local(path))
    # Whole seconds, as tf.io.gfile's local stat gives them: the cache keys made of it (token
    # cache, teacher file) stay those of runs that read their files through TensorFlow.
    return SimpleNamespace(length=found.st_size, mtime_nsec=int(found.st_mtime) * 10**9)


@_or_cloud
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
    if target.startswith(gcs_gfile.SCHEME) and "://" not in source:
        gcs_gfile.upload(source, target)
        return
    shutil.copyfile(_local(source), _local(target))


def rename(source: str, target: str, overwrite: bool = False) -> None:
    if not overwrite and exists(target):
        raise FileExistsError(f"{target} exists")
    os.replace(_local(source), _local(target))


@_or_cloud
def GFile(path: str, mode: str = "r"):  # noqa: N802  tf.io.gfile's name
    """A file as tf.io.gfile opens one: text as UTF-8, line ends as written."""
    if "b" in mode:
        return open(_local(path), mode)
    return open(_local(path), mode, encoding="utf-8", newline="")


io = SimpleNamespace(
    gfile=SimpleNamespace(
        exists=exists,
        isdir=isdir,
        listdir=listdir,
        stat=stat,
        walk=walk,
        glob=glob,
        makedirs=makedirs,
        remove=remove,
        rmtree=rmtree,
        copy=copy,
        rename=rename,
        GFile=GFile,
    )
)
errors = gcs_gfile.errors  # a local path fails with OSError; a gs:// one with these
