"""`python -m trainer.prepare`: raw labelled files -> stratified train/eval/test files."""

import sys

import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli
from trainer.data import preparation

if __name__ == "__main__":
    sys.exit(cli.run(preparation.main))
