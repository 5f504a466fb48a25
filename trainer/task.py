"""`python -m trainer.task`: the training job's entry point, locally and on Vertex AI."""
import logging
import os
import shutil
import sys
import tempfile
import warnings

import trainer  # sets TF_USE_LEGACY_KERAS before TensorFlow loads
from trainer import config as config_lib
from trainer.cloud import environment as vertex
from trainer.errors import UserError

log = logging.getLogger("trainer")


def setup_logging(log_path: str = None) -> logging.Handler:
    """Progress lines for people on stdout, and the same lines in training.log."""
    formatter = logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S")
    log.setLevel(logging.INFO)
    log.propagate = False
    log.handlers.clear()
    console = logging.StreamHandler(sys.stdout)
    console.setFormatter(formatter)
    log.addHandler(console)
    file_handler = None
    if log_path:
        file_handler = logging.FileHandler(log_path, encoding="utf-8")
        file_handler.setFormatter(formatter)
        log.addHandler(file_handler)
    # TensorFlow's Python-side chatter (deprecations, retracing notes) is not for users.
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="tensorflow.*|tf_keras.*|tensorflow_hub.*")
    return file_handler


def main(argv=None, environ=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    setup_logging()
    local_log, remote_log = None, None
    try:
        config = config_lib.build_config(argv, environ)
        trainer.import_tensorflow()
        from trainer import versions
        versions.check_coupled_versions()
        job_dir = config.output.job_dir
        _, _, is_chief = vertex.task_role(vertex.read_environment(environ).cluster)
        # training.log is appended locally and copied next to the other artifacts at the end,
        # since gs:// objects cannot be appended to. It is the chief's: the other workers of a
        # multi-worker job log to stdout only, or they would write over it (issue 4).
        if is_chief and "://" in job_dir:
            local_log = os.path.join(tempfile.mkdtemp(prefix="trainer-log-"), "training.log")
            remote_log = job_dir.rstrip("/") + "/training.log"
        elif is_chief:
            os.makedirs(job_dir, exist_ok=True)
            local_log = os.path.join(job_dir, "training.log")
        setup_logging(local_log)
        from trainer.training import run as train
        train.run(config, environ)
        return 0
    except UserError as e:
        log.error("error: %s", e)
        return e.exit_code
    except KeyboardInterrupt:
        log.error("interrupted; rerun the same command to resume from the last checkpoint")
        return 130
    finally:
        if remote_log:
            from trainer import storage
            with open(local_log, encoding="utf-8") as f:
                storage.write_text_atomic(remote_log, f.read())
            shutil.rmtree(os.path.dirname(local_log), ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
