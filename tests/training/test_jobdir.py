"""Whether a run in a job dir is new, resumed or already finished, and when it may replace what
is there: the rules behind --overwrite, Vertex restarts and a finished run's protection."""

import json

import pytest

from trainer import config as config_lib
from trainer.errors import UserError
from trainer.training import jobdir


def config_for(job_dir, *flags):
    return config_lib.build_config(["--job-dir", str(job_dir), *flags], {})


def unfinished(job_dir, *flags, job_id=None, checkpointed=True):
    """A job dir as a killed run leaves it: config.json, on Vertex its job id, and (unless it
    stopped before its first checkpoint) the resume checkpoint's state file."""
    config = config_for(job_dir, *flags)
    paths = jobdir.JobPaths.from_config(config)
    jobdir.start_new(paths, job_id)
    config_lib.save(config, paths.config)
    if checkpointed:
        (job_dir / "checkpoints" / "resume").mkdir(parents=True)
        (job_dir / "checkpoints" / "resume" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    return paths


def finish(paths):
    with open(paths.metrics, "w") as f:
        f.write("{}")


def test_a_fresh_job_dir_is_a_new_run(tmp_path):
    config = config_for(tmp_path / "job")
    assert jobdir.decide(config, jobdir.JobPaths.from_config(config), None) == jobdir.NEW


def test_the_same_command_resumes_an_unfinished_run(tmp_path):
    paths = unfinished(tmp_path)
    assert jobdir.decide(config_for(tmp_path), paths, None) == jobdir.RESUME


def test_other_settings_on_an_unfinished_run_are_refused_naming_them(tmp_path):
    paths = unfinished(tmp_path)
    with pytest.raises(UserError, match=r"other settings \(train.epochs: None -> 5\)"):
        jobdir.decide(config_for(tmp_path, "--epochs", "5"), paths, None)


def test_a_run_that_failed_before_its_first_checkpoint_does_not_hold_back_the_corrected_command(tmp_path):
    """A wrong column stops a run after config.json and training.log: the corrected command is
    a new run, not "an unfinished run with other settings" (issue #23, 2)."""
    paths = unfinished(tmp_path, checkpointed=False)
    assert jobdir.decide(config_for(tmp_path, "--label-column", "stars"), paths, None) == jobdir.NEW


def test_rerunning_a_run_that_saved_no_checkpoint_unchanged_is_a_new_run(tmp_path):
    paths = unfinished(tmp_path, checkpointed=False)
    assert jobdir.decide(config_for(tmp_path), paths, None) == jobdir.NEW


def test_locally_overwrite_starts_an_unfinished_run_over(tmp_path):
    paths = unfinished(tmp_path)
    assert jobdir.decide(config_for(tmp_path, "--overwrite"), paths, None) == jobdir.NEW


def test_a_vertex_restart_with_overwrite_resumes_its_own_job(tmp_path):
    paths = unfinished(tmp_path, "--overwrite", job_id="123")
    assert jobdir.decide(config_for(tmp_path, "--overwrite"), paths, "123") == jobdir.RESUME


def test_overwrite_from_another_vertex_job_starts_over(tmp_path):
    paths = unfinished(tmp_path, "--overwrite", job_id="123")
    assert jobdir.decide(config_for(tmp_path, "--overwrite"), paths, "456") == jobdir.NEW


def test_a_finished_run_is_refused_without_overwrite(tmp_path):
    paths = unfinished(tmp_path)
    finish(paths)
    with pytest.raises(UserError, match="holds a finished run"):
        jobdir.decide(config_for(tmp_path), paths, None)
    assert jobdir.decide(config_for(tmp_path, "--overwrite"), paths, None) == jobdir.NEW


def test_a_vertex_job_restarted_after_it_finished_does_nothing(tmp_path):
    paths = unfinished(tmp_path, "--overwrite", job_id="123")
    finish(paths)
    assert jobdir.decide(config_for(tmp_path, "--overwrite"), paths, "123") == jobdir.FINISHED


def test_starting_over_clears_checkpoints_history_and_metrics_and_records_the_job(tmp_path):
    paths = unfinished(tmp_path, job_id="1")
    finish(paths)
    (tmp_path / "eval_history.csv").write_text("epoch\n1\n")
    jobdir.start_new(paths, "2")
    assert not (tmp_path / "metrics.json").exists() and not (tmp_path / "eval_history.csv").exists()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["job.json"]
    assert json.loads((tmp_path / "checkpoints" / "job.json").read_text()) == {"vertex_job_id": "2"}


def test_starting_over_keeps_the_files_a_checkpoint_dir_of_the_users_holds(tmp_path):
    """Issue #49, 1: --checkpoint-dir may name a folder that holds other things."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    paths = unfinished(tmp_path / "job", "--checkpoint-dir", str(mine), "--overwrite")
    jobdir.start_new(paths, None)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_a_metrics_json_no_run_wrote_is_refused_and_kept(tmp_path):
    (tmp_path / "metrics.json").write_text("{}")
    config = config_for(tmp_path, "--overwrite")
    with pytest.raises(UserError, match="holds a metrics.json that no trainer.task run wrote"):
        jobdir.decide(config, jobdir.JobPaths.from_config(config), None)
    assert (tmp_path / "metrics.json").exists()


def test_a_writable_job_dir_passes_the_check_and_keeps_nothing_of_it(tmp_path):
    jobdir.check_writable(str(tmp_path / "job"))
    assert list((tmp_path / "job").iterdir()) == []


class Counter:
    def __init__(self, value):
        self.value = value

    def numpy(self):
        return self.value


@pytest.mark.parametrize(
    "keep, left", [("all", ["best", "job.json", "resume"]), ("best", ["best", "job.json"]), ("none", ["job.json"])]
)
def test_a_finished_run_keeps_the_checkpoints_keep_checkpoints_names(tmp_path, keep, left):
    """Issue #23, 11: checkpoints/best and /resume are 171 MB each for the quick start."""
    paths = unfinished(tmp_path, job_id="1")
    (tmp_path / "checkpoints" / "best" / "epoch-2").mkdir(parents=True)
    jobdir.drop_checkpoints(paths, keep)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == left


def test_keeping_no_checkpoints_outside_vertex_leaves_no_checkpoints_directory(tmp_path):
    paths = unfinished(tmp_path)
    assert config_for(tmp_path).output.keep_checkpoints == "none"  # the default
    jobdir.drop_checkpoints(paths, "none")
    assert not (tmp_path / "checkpoints").exists()


def interrupted_message(tmp_path, state, epochs_done=None):
    from trainer.training import run
    from trainer.training.context import RunContext, Trainable

    config = config_for(tmp_path / "job")
    ctx = RunContext(config, {}, jobdir.JobPaths.from_config(config), is_chief=True, state=state)
    if epochs_done is not None:
        ctx.trainable = Trainable(None, None, Counter(epochs_done), 0, [])
    return run._interrupted_message(ctx)


def test_ctrl_c_before_any_checkpoint_says_a_rerun_starts_over(tmp_path):
    assert (
        interrupted_message(tmp_path, jobdir.NEW)
        == "interrupted before the first epoch finished; rerunning the same command starts over"
    )
    assert "starts over" in interrupted_message(tmp_path, jobdir.NEW, epochs_done=0)


def test_ctrl_c_after_an_epoch_says_a_rerun_resumes(tmp_path):
    message = interrupted_message(tmp_path, jobdir.NEW, epochs_done=2)
    assert message == "interrupted; rerun the same command to resume after the last completed epoch (2)"


# --- a --dry-run checks a command: the real one replaces what it left (issue #37, 10) -------------


def test_the_real_command_replaces_a_finished_dry_run_without_overwrite(tmp_path):
    paths = unfinished(tmp_path, "--dry-run")
    (tmp_path / "metrics.json").write_text(json.dumps({"dry_run": True, "hyperparameters": {"dry_run": True}}))
    assert jobdir.decide(config_for(tmp_path), paths, None) == jobdir.NEW


def test_the_real_command_replaces_an_unfinished_dry_run_instead_of_resuming_it(tmp_path):
    paths = unfinished(tmp_path, "--dry-run")
    assert jobdir.decide(config_for(tmp_path), paths, None) == jobdir.NEW


# --- what trainer.report says of a job dir without metrics.json (issue #37, 16) -----------------


def test_a_run_that_failed_before_its_first_checkpoint_has_nothing_to_resume(tmp_path):
    paths = unfinished(tmp_path, checkpointed=False)
    (tmp_path / "training.log").write_text("job dir ...\nerror: --label-column: no column 'stars' in train.csv\n")
    assert jobdir.why_unfinished(paths) == (
        "its run stopped before its first checkpoint (it ended: --label-column: no column 'stars' in "
        "train.csv), so there is nothing to report or resume; rerun trainer.task"
    )


def test_a_run_with_a_resume_checkpoint_is_to_be_resumed(tmp_path):
    assert (
        jobdir.why_unfinished(unfinished(tmp_path))
        == "its run stopped before it finished; rerun the same trainer.task command to resume it"
    )


def test_a_run_still_going_is_named_and_waited_for(tmp_path):
    paths = unfinished(tmp_path)
    held = jobdir.take_ownership(paths, {})
    try:
        assert (
            jobdir.why_unfinished(paths) == f"a run is still going there ({held.owner.describe()}); "
            f"wait for it to finish"
        )
    finally:
        held.release()


# --- a refused command leaves no job dir behind (issue 64, low) -----------------------------------


def refused_in(job_dir, *extra):
    """A job dir as a run refused while reading its data leaves it, and what else is named."""
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "config.json").write_text("{}")
    (job_dir / "training.log").write_text("job dir ...\nerror: train.csv line 2: label is missing\n")
    for name in extra:
        (job_dir / name).mkdir()


def test_a_refused_run_removes_the_job_dir_and_the_parents_it_created(tmp_path):
    created = jobdir.new_directories(str(tmp_path / "runs" / "2026" / "job"))
    assert created == [str(tmp_path / "runs" / "2026" / "job"), str(tmp_path / "runs" / "2026"), str(tmp_path / "runs")]
    refused_in(tmp_path / "runs" / "2026" / "job")
    jobdir.remove_refused(created)
    assert list(tmp_path.iterdir()) == []


def test_a_refused_run_keeps_a_job_dir_that_existed_and_its_training_log(tmp_path):
    (tmp_path / "job").mkdir()
    created = jobdir.new_directories(str(tmp_path / "job"))
    refused_in(tmp_path / "job")
    jobdir.remove_refused(created)
    assert "error: train.csv line 2" in (tmp_path / "job" / "training.log").read_text()


def test_a_refused_run_that_wrote_more_keeps_its_job_dir_whole(tmp_path):
    """A token cache or a teacher's outputs: the corrected rerun reuses them."""
    created = jobdir.new_directories(str(tmp_path / "job"))
    refused_in(tmp_path / "job", "cache")
    jobdir.remove_refused(created)
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == ["cache", "config.json", "training.log"]


def test_a_parent_that_gained_other_files_meanwhile_stays(tmp_path):
    created = jobdir.new_directories(str(tmp_path / "runs" / "job"))
    refused_in(tmp_path / "runs" / "job")
    (tmp_path / "runs" / "other.csv").write_text("text,label\n")
    jobdir.remove_refused(created)
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["other.csv"]


def test_a_gs_job_dir_has_no_directories_to_remove():
    assert jobdir.new_directories("gs://bucket/runs/job") == []
