"""`python -m trainer.prepare`: raw labelled files -> stratified train/eval/test files."""

import sys

from trainer import cli
from trainer.data import preparation

if __name__ == "__main__":
    sys.exit(cli.run(preparation.main))
