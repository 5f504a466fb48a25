"""What every entry point shares: logging for people, and one way to fail.

Each `python -m trainer.X` module ends in `sys.exit(cli.run(main))`: a `UserError` becomes one
`error: ...` line on stderr and its exit code (2), Ctrl-C exits 130, SIGTERM 143, and nothing we
could have checked reaches a user as a traceback.
"""
import argparse
import logging
import signal
import sys
import warnings
from typing import Callable, Optional, Sequence

from trainer import __version__
from trainer.errors import UserError

log = logging.getLogger("trainer")
_FORMAT = logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S")


class ArgumentParser(argparse.ArgumentParser):
    """argparse for every entry point: a bad flag (`--epochs three`) is one `error:` line naming
    it and exit 2, like every other bad input, instead of the whole usage first; and --version.
    Subcommands (trainer.submit's) are built with this class too (argparse's default)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.add_help:  # a parser made only to be a parent (add_help=False) adds neither
            self.add_argument("--version", action="version", help="Print the version and exit.",
                              version=f"vertex-bert-trainer {__version__}")

    def error(self, message):
        raise UserError(f"{message.removeprefix('argument ')} (see {self.prog} --help)")


def setup_logging(verbose: bool = False) -> None:
    """Progress lines for people on stdout; TensorFlow's Python-side chatter only with --verbose."""
    log.setLevel(logging.INFO)
    log.propagate = False
    for handler in list(log.handlers):
        if getattr(handler, "_trainer_console", False):
            log.removeHandler(handler)
    console = logging.StreamHandler(sys.stdout)
    console.setFormatter(_FORMAT)
    console._trainer_console = True
    log.addHandler(console)
    if not verbose:
        logging.getLogger("tensorflow").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", module="tensorflow.*|tf_keras.*|tensorflow_hub.*|keras.*")


def add_log_file(path: str) -> logging.Handler:
    """Copies every progress line into `path` (training.log) from now on."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(_FORMAT)
    log.addHandler(handler)
    return handler


def remove_log_file(handler: Optional[logging.Handler]) -> None:
    if handler is not None:
        log.removeHandler(handler)
        handler.close()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread runs: how Vertex preempts a job and `kill` stops a
    process. Unhandled, SIGTERM ends Python at once with exit 143: no log line, no `finally`,
    so the job dir's lock stayed behind. As an exception it unwinds like Ctrl-C: every stage's
    cleanup runs, the last checkpoint is kept, and the exit code stays 143 (128 + SIGTERM)."""

    exit_code = 128 + signal.SIGTERM


def _raise_terminated(signum, frame):
    raise Terminated()


def run(main: Callable[[Sequence[str]], Optional[int]], argv: Optional[Sequence[str]] = None,
        interrupted: str = "interrupted") -> int:
    """Calls `main(argv)` and turns the failures a user can cause into one line and an exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return main(argv) or 0
    except UserError as error:
        fail(str(error))
        return error.exit_code
    except Terminated:
        fail(f"{interrupted} (SIGTERM)")
        return Terminated.exit_code
    except KeyboardInterrupt:
        fail(interrupted)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def fail(message: str) -> None:
    """The one error line, on stderr (a training run also records it in its training.log)."""
    sys.stdout.flush()
    print(f"error: {message}", file=sys.stderr, flush=True)
