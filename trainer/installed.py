"""Which of the package's two environments this Python is: the TensorFlow stack (`bash
scripts/install.sh`: training, the SavedModel and its copies, explanations) or the ONNX runtime
alone (`bash scripts/install.sh onnx`: trainer.predict, trainer.serve and trainer.evaluate on
a model dir's ONNX copies). Asked without importing TensorFlow, which costs seconds.
"""
import functools
import importlib.util

from trainer.errors import UserError

# The packages the TensorFlow stack adds; the ONNX runtime's environment has none of them.
TENSORFLOW_STACK = ("tensorflow", "tf_keras", "tensorflow_text", "tensorflow_hub")
INSTALL_TENSORFLOW = "bash scripts/install.sh"


@functools.lru_cache(maxsize=None)
def tensorflow() -> bool:
    """Whether TensorFlow can be imported here (found, never imported). An import hook that
    refuses it (the tests' stand-in for an environment without it) counts as not installed."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except ImportError:
        return False


def without_tensorflow(what: str) -> UserError:
    """The one line for `what` (a command, a flag) in an environment without TensorFlow."""
    return UserError(f"{what} needs TensorFlow, which this Python does not have (an ONNX runtime "
                     f"environment: `bash scripts/install.sh onnx`); install the TensorFlow stack "
                     f"with `{INSTALL_TENSORFLOW}`")


def require_tensorflow(what: str) -> None:
    if not tensorflow():
        raise without_tensorflow(what)


def is_missing_tensorflow(error: ImportError) -> bool:
    """Whether an import failed for want of a package of the TensorFlow stack."""
    return (getattr(error, "name", None) or "").split(".")[0] in TENSORFLOW_STACK
