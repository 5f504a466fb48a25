"""A directory cache for converted encoders, safe with concurrent writers.

Each entry is built in a scratch directory inside the cache and renamed into place: a reader
sees a complete entry or none, and when two workers build the same entry the second rename
fails harmlessly and its copy is discarded. The cache is a local directory: renaming a
directory is atomic there, not on gs://.
"""

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping


def default_cache_dir(environ: Mapping[str, str]) -> str:
    """$VBT_CACHE_DIR, else $XDG_CACHE_HOME/vertex-bert-trainer, else ~/.cache/vertex-bert-trainer."""
    if environ.get("VBT_CACHE_DIR"):
        return environ["VBT_CACHE_DIR"]
    base = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vertex-bert-trainer")


def cached_directory(cache_dir: str, key: str, build: Callable[[str], None]) -> str:
    """`cache_dir`/`key`, filled by `build(directory)` the first time it is asked for."""
    target = os.path.join(cache_dir, key)
    if os.path.isdir(target):
        return target
    os.makedirs(cache_dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f".{key}.building-", dir=cache_dir)
    try:
        build(scratch)
        os.rename(scratch, target)
    except OSError:
        if not os.path.isdir(target):  # not a lost race: a real failure
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
