"""TensorFlow's native start-up lines (absl's "before InitializeLog" banner, the oneDNN and CUDA
notes) stay out of a command's stderr wherever TensorFlow is first imported: a local file is read
without it, so the first import may be any module's."""

import subprocess
import sys

import pytest

BANNER = ("absl::InitializeLog", "port.cc", "cudart_stub.cc", "cpu_feature_guard.cc")


def stderr_of(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stderr


@pytest.mark.parametrize(
    "first_import",
    [
        "import tensorflow, tensorflow_text",
        # a SavedModel's signature read, and Keras 2 alone: the same quieting (CI's slow line)
        pytest.param("from tensorflow.core.protobuf import saved_model_pb2", marks=pytest.mark.slow),
        pytest.param("import tf_keras", marks=pytest.mark.slow),
    ],
)
def test_a_first_import_of_tensorflow_anywhere_prints_no_start_up_lines(first_import):
    printed = stderr_of(f"import trainer\n{first_import}\nimport tensorflow_text")
    assert not [line for line in printed.splitlines() if any(mark in line for mark in BANNER)]


@pytest.mark.slow  # a fresh process importing TensorFlow (CI's slow line)
def test_verbose_shows_everything_tensorflow_prints():
    printed = stderr_of("import trainer\ntrainer.import_tensorflow(verbose=True)")
    assert "absl::InitializeLog" in printed
