"""Which of the package's two environments this Python is: the TensorFlow stack (`bash
scripts/install.sh`: training, the SavedModel and its copies, explanations) or the ONNX runtime
alone (`bash scripts/install.sh onnx`: trainer.predict and trainer.serve on a model dir's ONNX
copies). Asked without importing TensorFlow, which costs seconds.
"""

import functools
import importlib.util

from trainer.errors import UserError

# The packages the TensorFlow stack adds; the ONNX runtime's environment has none of them.
TENSORFLOW_STACK = ("tensorflow", "tf_keras", "tensorflow_text", "tensorflow_hub")
# Modules of setup.py's other requirements that the ONNX runtime's environment leaves out
# (docker/serve-onnx.txt), by the name a user installs: a command that needs one there
# (trainer.evaluate scores with scikit-learn and SciPy) is said in one line as well.
NOT_IN_THE_ONNX_RUNTIME = {
    **{module: "TensorFlow" for module in TENSORFLOW_STACK},
    "sklearn": "scikit-learn",
    "scipy": "SciPy",
    "matplotlib": "matplotlib",
    "jinja2": "Jinja2",
    "safetensors": "safetensors",
    "optuna": "Optuna",
    "cleanlab": "cleanlab",
    "ai_edge_litert": "LiteRT",
}
INSTALL_TENSORFLOW = "bash scripts/install.sh"


@functools.cache
def tensorflow() -> bool:
    """Whether TensorFlow can be imported here (found, never imported). An import hook that
    refuses it (the tests' stand-in for an environment without it) counts as not installed."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except ImportError:
        return False


def without(what: str, package: str = "TensorFlow") -> UserError:
    """The one line for `what` (a command, a flag) where `package` is not installed."""
    return UserError(
        f"{what} needs {package}, which this Python does not have (an ONNX runtime "
        f"environment: `bash scripts/install.sh onnx`); install the TensorFlow stack "
        f"with `{INSTALL_TENSORFLOW}`"
    )


def require_tensorflow(what: str) -> None:
    if not tensorflow():
        raise without(what)


def missing_package(error: ImportError) -> str | None:
    """The package (as NOT_IN_THE_ONNX_RUNTIME names it) whose absence made an import fail, or
    None for any other import error."""
    return NOT_IN_THE_ONNX_RUNTIME.get((getattr(error, "name", None) or "").split(".")[0])
