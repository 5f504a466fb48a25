"""`python -m trainer.export_quantized`: write the checked int8, bfloat16 or ONNX copy of a finished run's model."""

import sys

import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli
from trainer.training import checked_copies

if __name__ == "__main__":
    sys.exit(cli.run(checked_copies.main))
