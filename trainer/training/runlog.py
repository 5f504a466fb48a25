"""training.log: the chief's progress lines, kept in the job dir while the run goes on.

Objects on gs:// cannot be appended to, so for a gs:// job dir the lines go to a local file that
is copied next to the other artifacts at every epoch end and when the run stops, however it
stops: a job killed mid-run leaves its log up to its last finished epoch.
"""

import logging
import os
import shutil
import tempfile

from trainer import cli, storage

log = logging.getLogger("trainer")


class RunLog:
    def __init__(self, path: str):
        self.path = path
        self._scratch = tempfile.mkdtemp(prefix="trainer-log-") if "://" in path else None
        self.local = os.path.join(self._scratch, "training.log") if self._scratch else path
        os.makedirs(os.path.dirname(os.path.abspath(self.local)), exist_ok=True)
        self._handler = cli.add_log_file(self.local)

    def sync(self) -> None:
        """Copies the lines so far to a gs:// job dir (a local log is already in place)."""
        if self._scratch:
            self._handler.flush()
            with open(self.local, encoding="utf-8") as f:
                storage.write_text_atomic(self.path, f.read())

    def record_error(self, message: str) -> None:
        """The line that ended the run, in the log only: the console shows it as `error: ...`."""
        self._handler.stream.write(f"error: {message}\n")
        self._handler.flush()

    def close(self) -> None:
        cli.remove_log_file(self._handler)
        try:
            self.sync()
        except Exception as error:  # the run's own error, if any, matters more than this one
            log.warning("could not copy training.log to %s: %s", self.path, getattr(error, "message", error))
        finally:
            if self._scratch:
                shutil.rmtree(self._scratch, ignore_errors=True)
