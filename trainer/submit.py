"""`python -m trainer.submit {train,tune,deploy,batch-predict}`: Vertex AI jobs, endpoints and batch predictions."""

import sys

import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli
from trainer.cloud import submission

if __name__ == "__main__":
    sys.exit(
        cli.run(
            submission.main,
            interrupted="stopped following the job; it keeps running on Vertex AI (see the console link above)",
        )
    )
