"""`python -m trainer.predict`: add predictions to every row of a CSV, TSV, JSON Lines or JSON file."""

import sys

import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli
from trainer.serving import predict_file

if __name__ == "__main__":
    sys.exit(cli.run(predict_file.main))
