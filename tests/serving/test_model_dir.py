"""--model-dir only ever replaces an export this package wrote (issue #49, 1): a folder of the
user's, a file, the job dir and a folder holding the run's inputs are refused with one line,
before anything is read, and nothing is deleted. The same rules on gs:// are in test_gcs.py."""

import subprocess
import sys

import pytest

from trainer.errors import UserError
from trainer.serving import model_dir


def export_like(directory, marked=True, job_dir=None):
    """A directory as an export leaves it (its contents are never read, only named), by the run
    in `job_dir` when given."""
    (directory / "variables").mkdir(parents=True)
    (directory / "saved_model.pb").write_bytes(b"pb")
    if marked:
        model_dir.write_marker(str(directory), job_dir and str(job_dir))
    return directory


def test_a_new_or_empty_directory_may_be_written(tmp_path):
    model_dir.check_replaceable(str(tmp_path / "new"))
    (tmp_path / "empty").mkdir()
    model_dir.check_replaceable(str(tmp_path / "empty"))


def test_an_export_of_this_package_may_be_replaced(tmp_path):
    model_dir.check_replaceable(str(export_like(tmp_path / "model")))


def test_a_folder_of_the_users_files_is_refused_naming_them(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.docx").write_text("years of work")
    with pytest.raises(
        UserError,
        match=r"^--model-dir: .*mine holds files this trainer did not "
        r"write \(thesis.docx\)",
    ):
        model_dir.check_replaceable(str(tmp_path / "mine"))


def test_a_file_is_refused(tmp_path):
    (tmp_path / "train.csv").write_text("text,label\n")
    with pytest.raises(UserError, match=r"train.csv is a file"):
        model_dir.check_replaceable(str(tmp_path / "train.csv"))


def test_an_export_the_user_added_files_to_is_refused(tmp_path):
    export = export_like(tmp_path / "model")
    (export / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match=r"\(notes.txt\)"):
        model_dir.check_replaceable(str(export))


def test_a_savedmodel_without_the_marker_is_not_taken_for_an_export(tmp_path):
    with pytest.raises(UserError, match="did not write"):
        model_dir.check_replaceable(str(export_like(tmp_path / "someone-elses", marked=False)))


def test_an_export_from_before_the_marker_is_replaced_at_its_job_dirs_default_place(tmp_path):
    """A finished run of an earlier version, rerun with --overwrite."""
    (tmp_path / "config.json").write_text("{}")
    model_dir.check_replaceable(str(export_like(tmp_path / "model", marked=False)))


# --- Another run's model (issue 64, 1): replaced only with --overwrite


def test_another_runs_model_is_refused_naming_the_run_that_wrote_it(tmp_path):
    export = export_like(tmp_path / "shared", job_dir=tmp_path / "qs")
    with pytest.raises(
        UserError,
        match=rf"^--model-dir: {export} holds the model exported by the "
        rf"run in {tmp_path / 'qs'}; pass --overwrite to replace "
        rf"it, or choose another --model-dir$",
    ):
        model_dir.check_run_may_replace(str(export), str(tmp_path / "md9"), overwrite=False)


def test_another_runs_model_is_replaced_with_overwrite(tmp_path):
    export = export_like(tmp_path / "shared", job_dir=tmp_path / "qs")
    model_dir.check_run_may_replace(str(export), str(tmp_path / "md9"), overwrite=True)


def test_a_runs_own_model_elsewhere_is_replaced_by_its_rerun(tmp_path):
    """A resumed run, or a dry run's real run, in the same job dir with the same --model-dir."""
    export = export_like(tmp_path / "shared", job_dir=tmp_path / "runs" / "a")
    model_dir.check_run_may_replace(str(export), str(tmp_path / "runs" / ".." / "runs" / "a"), overwrite=False)


def test_the_job_dirs_own_model_is_its_own_whoever_wrote_it(tmp_path):
    """A copied job dir's model/ names the original's job dir; jobdir.decide rules there."""
    export = export_like(tmp_path / "copy" / "model", job_dir=tmp_path / "original")
    model_dir.check_run_may_replace(str(export), str(tmp_path / "copy"), overwrite=False)


def test_an_older_marked_export_in_another_job_dir_is_refused_naming_that_job_dir(tmp_path):
    """A marker written before it named the run: the job dir the export sits in is the run's."""
    (tmp_path / "old" / "model").mkdir(parents=True)
    (tmp_path / "old" / "config.json").write_text("{}")
    export = export_like(tmp_path / "old" / "model", job_dir=None)
    with pytest.raises(UserError, match=rf"holds the model exported by the run in {tmp_path / 'old'};"):
        model_dir.check_run_may_replace(str(export), str(tmp_path / "new"), overwrite=False)


def test_an_unmarked_export_in_another_job_dir_is_refused_naming_that_job_dir(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.json").write_text("{}")
    export = export_like(tmp_path / "old" / "model", marked=False)
    with pytest.raises(UserError, match=rf"holds the model exported by the run in {tmp_path / 'old'};"):
        model_dir.check_run_may_replace(str(export), str(tmp_path / "new"), overwrite=False)


def test_a_marked_export_naming_no_run_is_refused_as_another_runs(tmp_path):
    export = export_like(tmp_path / "shared", job_dir=None)
    with pytest.raises(UserError, match=r"another run \(its trainer_export.json names no job dir\)"):
        model_dir.check_run_may_replace(str(export), str(tmp_path / "md9"), overwrite=False)


def test_a_new_or_empty_model_dir_belongs_to_no_run(tmp_path):
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "new", tmp_path / "empty"):
        model_dir.check_run_may_replace(str(path), str(tmp_path / "md9"), overwrite=False)


@pytest.mark.parametrize(
    "flag, path, word",
    [
        ("--job-dir", "runs/a", "is"),
        ("--training-file", "runs/a/train.csv", "holds"),
        ("--checkpoint-dir", "runs/a/checkpoints", "holds"),
        ("--cache-dir", "runs/a/", "is"),
    ],
)
def test_a_model_dir_that_is_or_holds_another_path_of_the_run_is_refused(flag, path, word):
    with pytest.raises(UserError, match=rf"^--model-dir: runs/a {word} {flag} {path};"):
        model_dir.check_apart("runs/a", [(flag, path)])


def test_paths_beside_the_model_dir_pass(tmp_path):
    model_dir.check_apart("runs/a/model", [("--job-dir", "runs/a"), ("--training-file", "runs/ab.csv")])


def test_a_glob_is_compared_by_the_part_before_its_first_wildcard():
    with pytest.raises(UserError, match=r"holds --training-file data/train-\*.csv"):
        model_dir.check_apart("data", [("--training-file", "data/train-*.csv")])
    with pytest.raises(UserError, match=r"holds --training-file dat\*/train.csv"):
        model_dir.check_apart("data", [("--training-file", "dat*/train.csv")])
    model_dir.check_apart("data", [("--training-file", "other/*.csv"), ("--training-file", "datb*.csv")])


def test_gs_paths_compare_without_trailing_slashes():
    with pytest.raises(UserError, match="is --job-dir"):
        model_dir.check_apart("gs://b/run/", [("--job-dir", "gs://b/run")])
    model_dir.check_apart("gs://b/run/model", [("--job-dir", "gs://b/run"), ("--job-dir", "gs://b/runs")])


@pytest.fixture(scope="module")
def refused_run(tmp_path_factory, tiny_encoder_dir, tiny_data):
    """`trainer.task --model-dir FOLDER --dry-run` on a folder of the user's."""
    root = tmp_path_factory.mktemp("refused")
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("keep me")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.task",
            "--encoder",
            tiny_encoder_dir,
            "--training-file",
            tiny_data["train"],
            "--job-dir",
            str(root / "job"),
            "--model-dir",
            str(root / "mine"),
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return root, result


def test_the_run_refuses_a_folder_of_the_users_before_reading_anything(refused_run):
    root, result = refused_run
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --model-dir: {root / 'mine'} holds files this trainer did not write (notes.txt); "
        f"a run replaces only its own export there. Choose a new or empty directory, or move "
        f"those files"
    ]
    assert (root / "mine" / "notes.txt").read_text() == "keep me"
    assert not (root / "job" / "config.json").exists()


@pytest.fixture(scope="module")
def dry_run_at_another_runs_model(tmp_path_factory, tiny_encoder_dir, tiny_data):
    """Issue 64, 1: `--model-dir` at a copy of the quick start's model, from a dry run."""
    root = tmp_path_factory.mktemp("another")
    (root / "qs_copy").mkdir()
    (root / "qs_copy" / "config.json").write_text("{}")
    export = export_like(root / "qs_copy" / "model", job_dir=root / "qs")
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.task",
            "--encoder",
            tiny_encoder_dir,
            "--training-file",
            tiny_data["train"],
            "--job-dir",
            str(root / "md9"),
            "--model-dir",
            str(export),
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return root, before, result


def test_a_dry_run_refuses_another_runs_model_with_one_line(dry_run_at_another_runs_model):
    root, _, result = dry_run_at_another_runs_model
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --model-dir: {root / 'qs_copy' / 'model'} holds the model exported by the run in "
        f"{root / 'qs'}; pass --overwrite to replace it, or choose another --model-dir"
    ]


def test_a_refused_dry_run_leaves_the_model_untouched_and_writes_nothing(dry_run_at_another_runs_model):
    root, before, _ = dry_run_at_another_runs_model
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before
