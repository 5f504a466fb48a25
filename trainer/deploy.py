"""`python -m trainer.deploy`: a finished job's model into the Model Registry and onto an endpoint.

The same command as `python -m trainer.submit deploy` (one implementation:
trainer.cloud.deployment), on its own so that scripts/deploy.sh and trainer.pipeline's deploy step
need no subcommand.
"""

import sys
from collections.abc import Sequence

import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli


def main(argv: Sequence[str]) -> int:
    from trainer.cloud import deployment

    return deployment.main(deployment.build_parser().parse_args(list(argv)), [])


if __name__ == "__main__":
    sys.exit(cli.run(main))
