"""`python -m trainer.serve --model-dir DIR`: serve an exported model over HTTP (Vertex AI's contract)."""

import sys

import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli
from trainer.serving import server

if __name__ == "__main__":
    sys.exit(cli.run(server.main))
