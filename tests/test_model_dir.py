"""--model-dir only ever replaces an export this package wrote (issue #49, 1): a folder of the
user's, a file, the job dir and a folder holding the run's inputs are refused with one line,
before anything is read, and nothing is deleted. The same rules on gs:// are in test_gcs.py."""
import subprocess
import sys

import pytest

from trainer.errors import UserError
from trainer.serving import model_dir


def export_like(directory, marked=True):
    """A directory as an export leaves it (its contents are never read, only named)."""
    (directory / "variables").mkdir(parents=True)
    (directory / "saved_model.pb").write_bytes(b"pb")
    if marked:
        model_dir.write_marker(str(directory))
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
    with pytest.raises(UserError, match=r"^--model-dir: .*mine holds files this trainer did not "
                                        r"write \(thesis.docx\)"):
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


@pytest.mark.parametrize("flag, path, word", [
    ("--job-dir", "runs/a", "is"), ("--training-file", "runs/a/train.csv", "holds"),
    ("--checkpoint-dir", "runs/a/checkpoints", "holds"), ("--cache-dir", "runs/a/", "is")])
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
        [sys.executable, "-m", "trainer.task", "--encoder", tiny_encoder_dir, "--training-file",
         tiny_data["train"], "--job-dir", str(root / "job"), "--model-dir", str(root / "mine"),
         "--dry-run"], capture_output=True, text=True, timeout=300)
    return root, result


def test_the_run_refuses_a_folder_of_the_users_before_reading_anything(refused_run):
    root, result = refused_run
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --model-dir: {root / 'mine'} holds files this trainer did not write (notes.txt); "
        f"a run replaces only its own export there. Choose a new or empty directory, or move "
        f"those files"]
    assert (root / "mine" / "notes.txt").read_text() == "keep me"
    assert not (root / "job" / "config.json").exists()
