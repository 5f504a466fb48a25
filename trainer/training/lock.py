"""One owner per directory: a lock that a second run in the same job dir (or search dir) is
refused by, with one line naming the run that holds it.

Two runs in one job dir destroy each other: the second clears the first's checkpoints while it
trains (issue #37, 1). The lock file (JOB_DIR/job.lock, SEARCH_DIR/search.lock) holds its
owner as JSON: host, pid, Vertex job and trial ids, start time and a heartbeat.

* Local directories: fcntl.flock, which the operating system releases when the process ends,
  however it ends: a killed run's lock is never stale.
* gs:// (an object store has no locks, and tf.io.gfile no conditional writes): Fischer's timed
  mutual exclusion (Lamport, "A fast mutual exclusion algorithm", 1987, section 1): read the
  lock; if it is free, write ours; wait longer than any taker's read-to-write takes; read it
  again, and whoever's record is there owns it. Cloud Storage reads are strongly consistent
  after a write (https://cloud.google.com/storage/docs/consistency). The owner rewrites its
  heartbeat every HEARTBEAT_SECONDS; a lock whose heartbeat is older than STALE_SECONDS, or
  whose pid is gone from this very host, is stale and taken over.

Vertex restarts a preempted replica with the same CLOUD_ML_JOB_ID: a lock of the same job (and
trial) is its own, never a reason to refuse; locally the restart waits for the old process.
"""

import contextlib
import dataclasses
import datetime
import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping

from trainer import storage
from trainer.errors import UserError
from trainer.vertex import environment as vertex

log = logging.getLogger("trainer")

HEARTBEAT_SECONDS = 60.0
STALE_SECONDS = 600.0
# Fischer's delay: longer than a taker's read-then-write on Cloud Storage (two requests).
SETTLE_SECONDS = 3.0


@dataclasses.dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: str  # UTC, ISO 8601
    job_id: str | None = None  # CLOUD_ML_JOB_ID
    trial_id: str | None = None  # CLOUD_ML_TRIAL_ID
    token: str = ""
    heartbeat: float = 0.0  # time.time() of the last refresh

    def describe(self) -> str:
        """How the refusal names the other run: a person can find it from this."""
        who = (
            f"Vertex job {self.job_id}" + (f" trial {self.trial_id}" if self.trial_id else "")
            if self.job_id
            else f"pid {self.pid}"
        )
        return f"{who} on host {self.host}, started {self.started}"

    def same_vertex_job(self, other: "Owner") -> bool:
        return self.job_id is not None and (self.job_id, self.trial_id) == (other.job_id, other.trial_id)


def owner_of(environ: Mapping[str, str], now: float, host: str, pid: int) -> Owner:
    """This process as a lock owner: a pure function of the environment mapping and the clock."""
    env = vertex.read_environment(environ)
    started = datetime.datetime.fromtimestamp(now, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Owner(host, pid, started, env.job_id, env.trial_id, uuid.uuid4().hex, now)


def parse(text: str) -> Owner | None:
    """The owner a lock file records; None when it is empty or half-written."""
    try:
        return Owner(**json.loads(text))
    except (ValueError, TypeError):
        return None


def _record(owner: Owner) -> str:
    return json.dumps(dataclasses.asdict(owner)) + "\n"


def is_stale(holder: Owner, me: Owner, now: float, alive: Callable[[int], bool]) -> bool:
    """Whether a gs:// lock's owner is gone: its pid has ended on this host, or it has not
    refreshed its heartbeat for STALE_SECONDS (it ran elsewhere and was killed)."""
    if holder.host == me.host and not alive(holder.pid):
        return True
    return now - holder.heartbeat > STALE_SECONDS


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class Held:
    """A lock this process holds; `release` lets it go (the process's end does too)."""

    def __init__(self, path: str, owner: Owner, handle=None):
        self.path, self.owner, self._handle = path, owner, handle
        self._stop = threading.Event()
        self._thread = None
        if handle is None:  # gs://: keep the heartbeat fresh while the run goes on
            self._thread = threading.Thread(target=self._beat, name="lock-heartbeat", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self.owner = dataclasses.replace(self.owner, heartbeat=time.time())
                storage.write_text_atomic(self.path, _record(self.owner))
            except Exception as error:  # a missed beat is retried; the run matters more
                log.warning("could not refresh %s: %s", self.path, getattr(error, "message", error))

    def release(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            try:
                holder = _read(self.path)
                if holder is not None and holder.token == self.owner.token:
                    storage.remove(self.path)
            except Exception as error:  # stale after STALE_SECONDS; the run's own error matters more
                log.warning("could not remove %s: %s", self.path, getattr(error, "message", error))
        elif self._handle is not None and not self._handle.closed:
            # Removed while still locked: a process waiting on this file finds it replaced
            # (the inode check in _lock_local) and locks the new one instead.
            with contextlib.suppress(FileNotFoundError):  # the job dir was deleted meanwhile
                os.unlink(self.path)
            self._handle.close()


def acquire(directory: str, name: str, environ: Mapping[str, str], busy: Callable[[Owner | None], str]) -> Held:
    """Takes DIRECTORY/NAME for this process, or raises UserError(busy(holder)); the holder is
    None when its record cannot be read (it is being written)."""
    path = storage.join(directory, name)
    me = owner_of(environ, time.time(), socket.gethostname(), os.getpid())
    if "://" in path:
        return _lock_object(path, me, busy)
    return _lock_local(path, me, busy)


def _lock_local(path: str, me: Owner, busy: Callable[[Owner | None], str]) -> Held:
    while True:
        handle = open(path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            holder = parse(handle.read())
            if holder is None or not holder.same_vertex_job(me):
                handle.close()
                raise UserError(busy(holder)) from None
            log.info("waiting for the previous replica of Vertex job %s to stop", me.job_id)
            fcntl.flock(handle, fcntl.LOCK_EX)
        # The file may have been released and removed between open and flock: lock the new one.
        if os.path.exists(path) and os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
            break
        handle.close()
    handle.seek(0)
    handle.truncate()
    handle.write(_record(me))
    handle.flush()
    return Held(path, me, handle)


def _lock_object(path: str, me: Owner, busy: Callable[[Owner | None], str]) -> Held:
    _read(path)  # untimed: the first Cloud Storage call also imports TensorFlow and connects
    start = time.monotonic()
    holder = _read(path)
    if holder is not None and not holder.same_vertex_job(me) and not is_stale(holder, me, time.time(), pid_alive):
        raise UserError(busy(holder))
    if holder is not None:
        log.info(
            "taking over %s from %s (%s)",
            path,
            holder.describe(),
            "the same Vertex job" if holder.same_vertex_job(me) else "no longer running",
        )
    storage.write_text_atomic(path, _record(me))
    if time.monotonic() - start > SETTLE_SECONDS:
        # Fischer's bound broken by this very process: another taker may have read "free" before
        # this write landed and already be running.
        raise UserError(
            f"--job-dir: could not take {path} within {SETTLE_SECONDS:.0f}s (Cloud Storage answers slowly); retry"
        )
    time.sleep(SETTLE_SECONDS)
    holder = _read(path)
    if holder is None or holder.token != me.token:
        raise UserError(busy(holder))
    return Held(path, me)


def running_owner(directory: str, name: str) -> Owner | None:
    """Who holds DIRECTORY/NAME now, by the gs:// lock's staleness rule (a killed local run's
    record stays, with a pid that is gone); None when no one does. For messages, not locking."""
    me = owner_of({}, time.time(), socket.gethostname(), os.getpid())
    holder = _read(storage.join(directory, name))
    return None if holder is None or is_stale(holder, me, time.time(), pid_alive) else holder


def _read(path: str) -> Owner | None:
    return parse(storage.read_text(path)) if storage.exists(path) else None
