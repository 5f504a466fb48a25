"""`python -m trainer.export_quantized`: write the checked int8, bfloat16 or ONNX copy of a finished run's model."""

import sys

from trainer import cli
from trainer.training import export_quantized

if __name__ == "__main__":
    sys.exit(cli.run(export_quantized.main))
