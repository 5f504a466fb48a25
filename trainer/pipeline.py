"""`python -m trainer.pipeline {compile,run}`: train -> evaluate -> gate -> register -> deploy, a KFP v2 pipeline.

KFP is an optional extra (`pip install .[pipeline]`): the training and serving images do not
carry it, and without it this command says how to install it.
"""

import sys

import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli
from trainer.errors import UserError


def main(argv) -> int:
    try:
        import kfp  # noqa: F401  (only to say what is missing before anything else)
    except ImportError:
        raise UserError(
            "python -m trainer.pipeline needs KFP, the `pipeline` extra: "
            "pip install 'vertex-bert-trainer[pipeline]' (or pip install kfp==2.17.3)"
        ) from None
    from trainer.cloud import pipeline_cli

    return pipeline_cli.main(argv)


if __name__ == "__main__":
    sys.exit(cli.run(main))
