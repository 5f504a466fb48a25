"""What every entry point shares: logging for people, and one way to fail.

Each `python -m trainer.X` module ends in `sys.exit(cli.run(main))`: a `UserError` becomes one
`error: ...` line on stderr and its exit code (2), Ctrl-C exits 130, SIGTERM 143, and nothing we
could have checked reaches a user as a traceback.
"""

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Sequence

from trainer import __version__, installed
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
            self.add_argument(
                "--version",
                action="version",
                help="Print the version and exit.",
                version=f"vertex-bert-trainer {__version__}",
            )

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


def remove_log_file(handler: logging.Handler | None) -> None:
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


# After SIGTERM or Ctrl-C, how long the process may take to end on its own before the watcher
# ends it, and how long the watcher's last words may take: 8 s in all, within issue 64's 10 s
# (Vertex gives a job 30 s from SIGTERM to SIGKILL).
GRACE_SECONDS = 6.0
LAST_WORDS_SECONDS = 2.0


@contextlib.contextmanager
def ends_soon_after_a_signal(last_words: Callable[[int], str]):
    """While the block runs, SIGTERM or Ctrl-C ends the process within GRACE_SECONDS +
    LAST_WORDS_SECONDS, whatever its main thread is doing.

    Python runs a signal's handler in the main thread between two bytecodes: a training step
    inside TensorFlow's C++ code holds it off until the step returns, 45 s for a 768-wide
    encoder on 2 busy cores (issue 64, 9). The C-level handler writes the signal's number to the
    wakeup fd at once (signal.set_wakeup_fd), and a watcher thread reads it there: if the block
    has not ended GRACE_SECONDS later, the watcher calls `last_words(signum)` (which cleans up
    and returns the error line's message), prints that line and ends the process with os._exit,
    exit code 143 (SIGTERM) or 130 (Ctrl-C), as the unhurried path would have."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    ended = threading.Event()  # the block ended on its own: the watcher lets it be
    ending = threading.Lock()  # held by whichever ends the run: the block's end or the watcher
    watcher = threading.Thread(
        target=_watch, args=(read_end, ended, ending, last_words), name="signal-deadline", daemon=True
    )
    watcher.start()
    try:
        yield
    finally:
        ending.acquire()  # waits only while the watcher is ending the process
        ended.set()
        signal.set_wakeup_fd(previous)
        os.close(write_end)  # the watcher reads the end of the pipe and stops


def _watch(read_end: int, ended: threading.Event, ending: threading.Lock, last_words: Callable[[int], str]) -> None:
    with os.fdopen(read_end, "rb", buffering=0) as wakeup:
        while True:
            received = wakeup.read(64)
            if not received:  # the block ended
                return
            stops = [signum for signum in received if signum in (signal.SIGTERM, signal.SIGINT)]
            if not stops or ended.wait(GRACE_SECONDS):
                continue  # the block ends on its own: the run says its own last words
            if ending.acquire(blocking=False):
                _end_now(stops[0], last_words)
            return  # the block is ending right now


def _end_now(signum: int, last_words: Callable[[int], str]) -> None:
    """Says the last words (bounded by LAST_WORDS_SECONDS: ending matters more) and exits."""
    code = Terminated.exit_code if signum == signal.SIGTERM else 130
    timer = threading.Timer(LAST_WORDS_SECONDS, os._exit, (code,))
    timer.daemon = True
    timer.start()
    try:
        message = last_words(signum)
    except Exception as error:  # whatever the cleanup hit, the process still ends, saying so
        message = f"{'interrupted' if code == 130 else 'terminated (SIGTERM)'}: {error}"
    fail(message)
    for handler in log.handlers:
        handler.flush()
    os._exit(code)


def run(
    main: Callable[[Sequence[str]], int | None],
    argv: Sequence[str] | None = None,
    interrupted: str = "interrupted",
) -> int:
    """Calls `main(argv)` and turns the failures a user can cause into one line and an exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return main(argv) or 0
    except UserError as error:
        fail(str(error))
        return error.exit_code
    except ModuleNotFoundError as error:  # a TensorFlow command in the ONNX runtime's environment
        if not installed.missing_package(error):
            raise
        fail(str(installed.without("this command", installed.missing_package(error))))
        return UserError.exit_code
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
