"""`python tests/helpers/without_tensorflow.py -m MODULE ARGS...`: runs MODULE as `python -m` does, in a
process where no package of the TensorFlow stack can be imported (each import fails as a
missing package's does): the ONNX runtime's environment, in the test suite's own Python."""

import importlib.abc
import runpy
import sys

STACK = ("tensorflow", "tf_keras", "tensorflow_text", "tensorflow_hub")


class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in STACK:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, Blocked())
    if sys.argv[1:2] != ["-m"] or len(sys.argv) < 3:
        sys.exit(f"usage: {sys.argv[0]} -m MODULE ARGS...")
    module = sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
