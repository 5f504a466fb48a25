"""`python -m trainer.prepare`: raw labelled files -> stratified train/eval/test files."""

import sys

from trainer import cli
from trainer.data import prepare

if __name__ == "__main__":
    sys.exit(cli.run(prepare.main))
