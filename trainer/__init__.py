"""vertex-bert-trainer: fine-tune BERT-family encoders for text classification.

Importing the package sets up the TensorFlow environment once, before TensorFlow itself is
imported anywhere: tensorflow-hub layers are Keras 2 layers, so `tf.keras` must resolve to
tf-keras (TF_USE_LEGACY_KERAS=1) rather than Keras 3, a normal run should not print a wall
of C++ start-up warnings, every x86 CPU should get the oneDNN kernels, and the TPU build of
TensorFlow must not wait on a metadata server off a TPU VM. Users may override each variable.
"""

import contextlib
import importlib.abc
import os
import re
import sys
import tempfile
import warnings

from trainer import tpu as _tpu

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# TensorFlow turns its oneDNN kernels on by default only on CPUs with AVX512_VNNI, AVX512_BF16
# or AMX (tensorflow/tensorflow#56039); on AVX2-only CPUs it falls back to Eigen's, which ran a
# float32 training step 1.82x slower and prediction 1.15x (docs/performance.md).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
# Off a TPU VM, tensorflow-tpu's import would wait on the GCE metadata server (trainer/tpu.py).
os.environ.update(_tpu.libtpu_environment(os.environ, _tpu.tpu_chips_attached()))

# tensorflow-hub 0.16.1 imports pkg_resources to check TensorFlow's version (tensorflow_hub/
# __init__.py); setuptools 67.5-80 warn on that import, and 81 removed it (setup.py pins
# setuptools below 81). torch, a test dependency, needs setuptools >= 77, so the warning would
# reach every run that shares its environment: it says nothing a user can act on.
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

__version__ = "0.1.0"

# Lines TensorFlow's shared libraries print while loading, before absl logging is initialised,
# so TF_CPP_MIN_LOG_LEVEL cannot silence them: the oneDNN notice, the missing-CUDA notes on a
# CPU host, and absl's "before InitializeLog" banner.
_STARTUP_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\)|"
    r"[IWE]\d{4} [\d:. ]+\d+ (port|cudart_stub|cuda_platform|cuda_executor|cpu_feature_guard)\.cc)"
)


def import_tensorflow(verbose: bool = False):
    """Imports TensorFlow and TF-Text (their start-up banner filtered out of stderr, as wherever
    they are first imported: _QuietStart). `verbose` shows everything TensorFlow logs, from C++ too.
    """
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
        _QuietStart.verbose = True
    import tensorflow
    import tensorflow_text  # noqa: F401  registers the tokenizer ops

    return tensorflow


class _QuietStart(importlib.abc.MetaPathFinder):
    """Filters _STARTUP_NOISE out of stderr wherever tensorflow or tensorflow_text is first
    imported: through import_tensorflow, or by whichever of the modules that import them a
    command reaches first (local files are read without TensorFlow, so a command has no one
    place that always comes first). Anything else written meanwhile, a real import error, is
    passed through."""

    NAMES = ("tensorflow", "tensorflow_text")
    verbose = False

    def find_spec(self, name, path=None, target=None):
        if name not in self.NAMES or self.verbose:
            return None
        # The finders after this one decide where it is, or that it is not to be imported
        spec = next(
            (
                found
                for finder in sys.meta_path[sys.meta_path.index(self) + 1 :]
                if (found := getattr(finder, "find_spec", lambda *_: None)(name, path, target))
            ),
            None,
        )
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


class _QuietLoader(importlib.abc.Loader):
    """A module's own loader, its execution run with stderr filtered; the rest is the loader's."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        with stderr_filtered(_STARTUP_NOISE):
            self._loader.exec_module(module)


sys.meta_path.insert(0, _QuietStart())


@contextlib.contextmanager
def stderr_filtered(noise: "re.Pattern"):
    """Drops the lines matching `noise` that native libraries write to file descriptor 2 meanwhile
    (where Python's sys.stderr cannot catch them); every other line is passed through."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True):
                if not noise.match(line):
                    sys.stderr.write(line)
