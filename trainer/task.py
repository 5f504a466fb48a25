"""`python -m trainer.task`: the training job's entry point, locally and on Vertex AI."""

import os
import sys

import trainer  # sets TF_USE_LEGACY_KERAS before TensorFlow loads
import trainer.tasks  # noqa: F401  (registers the task kinds: trainer/task_registry.py)
from trainer import cli
from trainer import config as config_lib


def main(argv, environ=None) -> int:
    environ = os.environ if environ is None else environ
    config = config_lib.build_config(argv, environ)
    cli.setup_logging(verbose=config.runtime.verbose)
    trainer.import_tensorflow(verbose=config.runtime.verbose)
    from trainer import versions
    from trainer.training import run

    versions.check_coupled_versions()
    run.run(config, environ, ignored_arguments=config_lib.ignored_arguments(argv))
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
