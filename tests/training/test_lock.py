"""One run per job dir (issue #37, 1): a second trainer.task in a job dir that a run owns is
refused with one line naming that run, and never clears its checkpoints; a lock whose owner is
gone is taken over; Vertex's restart of the same job is never refused.

The gs:// lock's rules run here on a local directory through the same trainer.storage calls
(tests/test_gcs.py runs two trainer.task processes on the emulator).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import labelled_rows, write_csv
from test_resume import start
from test_task import run_cli

from trainer.errors import UserError
from trainer.training import lock


def busy(holder):
    return f"busy: {holder.describe() if holder else 'unknown'}"


def wait_for(condition, process, what, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if condition():
            return
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"no {what} before exit/timeout:\n{process.communicate()[0]}")


# --- two trainer.task processes on one local job dir ---------------------------------------------


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_a_second_run_in_a_job_dir_is_refused_naming_the_first_and_leaves_it_training(
    tiny_encoder_dir, tiny_data, tmp_path
):
    """The first run trains 600 rows for 50 epochs: it is still going when the second, the
    same command, has started and been refused, before it wrote anything there."""
    job_dir = tmp_path / "job"
    command = [
        "--encoder",
        tiny_encoder_dir,
        "--job-dir",
        job_dir,
        "--epochs",
        "50",
        "--training-file",
        write_csv(tmp_path / "train.csv", labelled_rows(600, 1)),
        "--validation-file",
        tiny_data["validation"],
        "--batch-size",
        "8",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
    ]
    first = start(command)
    try:
        lock_file = job_dir / "job.lock"
        wait_for(lambda: lock_file.exists() and lock.parse(lock_file.read_text()), first, "job.lock")
        second = run_cli(*command)
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stderr.splitlines() == [
        f"error: --job-dir: {job_dir} is in use by another trainer.task run (pid {first.pid} on host "
        f"{socket.gethostname()}, started {json.loads((job_dir / 'job.lock').read_text())['started']}); "
        f"wait for it to finish, or choose another --job-dir"
    ]
    assert "error:" not in (job_dir / "training.log").read_text()  # the first run's log is its own


# --- a local lock: the operating system's, released when its process ends ----------------------

HOLD = (
    "import sys, time; from trainer.training import lock; "
    "held = lock.acquire(sys.argv[1], 'job.lock', {}, str); print('held', flush=True); time.sleep(600)"
)


@pytest.fixture
def holder(tmp_path):
    """Another process holding tmp_path/job.lock until it is killed."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "held\n"
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_local_lock_held_by_another_process_is_refused_naming_it(tmp_path, holder):
    with pytest.raises(
        UserError,
        match=rf"^busy: pid {holder.pid} on host {socket.gethostname()}, "
        rf"started \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC$",
    ):
        lock.acquire(str(tmp_path), "job.lock", {}, busy)


def test_a_local_lock_whose_process_was_killed_is_taken_over(tmp_path, holder):
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    held = lock.acquire(str(tmp_path), "job.lock", {}, busy)
    assert lock.parse((tmp_path / "job.lock").read_text()).pid == os.getpid()
    held.release()
    assert not (tmp_path / "job.lock").exists()


def test_a_released_local_lock_can_be_taken_again_by_the_same_process(tmp_path):
    """trainer.task run twice in one process (a notebook): the first run's lock is gone."""
    lock.acquire(str(tmp_path), "job.lock", {}, busy).release()
    lock.acquire(str(tmp_path), "job.lock", {}, busy).release()


# --- the gs:// lock's rules ---------------------------------------------------------------------

NOW = 1_800_000_000.0
VERTEX = {"CLOUD_ML_JOB_ID": "123"}


@pytest.fixture
def instant(monkeypatch):
    monkeypatch.setattr(lock, "SETTLE_SECONDS", 0.2)


def recorded(tmp_path, environ=None, host=None, pid=None, heartbeat=None):
    """A gs://-style lock record in tmp_path/job.lock, as another run left it."""
    owner = lock.owner_of(environ or {}, NOW, host or socket.gethostname(), pid or os.getppid())
    owner = lock.Owner(**{**owner.__dict__, "heartbeat": heartbeat if heartbeat is not None else time.time()})
    (tmp_path / "job.lock").write_text(json.dumps(owner.__dict__))
    return owner


def take(tmp_path, environ=None):
    me = lock.owner_of(environ or {}, time.time(), socket.gethostname(), os.getpid())
    return lock._lock_object(str(tmp_path / "job.lock"), me, busy)


def ended_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_gs_lock_of_a_live_run_is_refused_naming_it(tmp_path, instant):
    other = recorded(tmp_path, host="vm-1", heartbeat=time.time() - 30)
    with pytest.raises(UserError, match=f"^busy: pid {other.pid} on host vm-1, started 2027-01-15 08:00:00 UTC$"):
        take(tmp_path)


def test_a_gs_lock_of_another_vertex_job_is_refused_naming_the_job(tmp_path, instant):
    recorded(tmp_path, environ={"CLOUD_ML_JOB_ID": "456"})
    with pytest.raises(UserError, match="^busy: Vertex job 456 on host"):
        take(tmp_path, VERTEX)


@pytest.mark.parametrize(
    "left_by", ["a pid gone from this host", "another host, silent too long", "the same Vertex job"]
)
def test_a_gs_lock_whose_owner_is_gone_or_restarted_is_taken_over(tmp_path, instant, left_by):
    old = {
        "a pid gone from this host": dict(pid=ended_pid()),
        "another host, silent too long": dict(host="vm-1", heartbeat=time.time() - lock.STALE_SECONDS - 1),
        "the same Vertex job": dict(environ=VERTEX),
    }[left_by]
    recorded(tmp_path, **old)
    held = take(tmp_path, VERTEX if left_by == "the same Vertex job" else None)
    assert lock.parse((tmp_path / "job.lock").read_text()).token == held.owner.token
    held.release()


def test_two_takers_at_once_leave_the_lock_to_the_last_writer(tmp_path, instant, monkeypatch):
    """Fischer's second read: a run that wrote its record during our wait owns the lock."""

    def other_writes(seconds):
        recorded(tmp_path, host="vm-2")

    monkeypatch.setattr(lock.time, "sleep", other_writes)
    with pytest.raises(UserError, match="^busy: pid .* on host vm-2"):
        take(tmp_path)


def test_releasing_a_gs_lock_removes_only_its_own_record(tmp_path, instant):
    held = take(tmp_path)
    other = recorded(tmp_path, host="vm-3")
    held.release()
    assert lock.parse((tmp_path / "job.lock").read_text()) == other
