"""The typed config: flags in, validated, saved with the run, read back the same."""

import datetime
import subprocess
import sys

import pytest

from trainer import config as config_lib
from trainer.errors import UserError


def build(*argv, environ=None):
    return config_lib.build_config(list(argv), environ or {}, now=datetime.datetime(2026, 1, 2, 3, 4, 5))


def test_flags_land_in_their_sections():
    config = build(
        "--epochs",
        "5",
        "--learning-rate",
        "3e-5",
        "--freeze-encoder",
        "--max-seq-length",
        "64",
        "--distribution",
        "mirrored",
    )
    assert config.train.epochs == 5 and config.train.learning_rate == 3e-5
    assert config.model.freeze_encoder and config.data.max_seq_length == 64
    assert config.runtime.distribution == "mirrored"


def test_json_round_trip_gives_an_equal_config(tmp_path):
    config = build("--epochs", "2", "--label-names", "a,b,c", "--job-dir", str(tmp_path))
    config_lib.save(config, str(tmp_path / "config.json"))
    assert config_lib.load(str(tmp_path / "config.json")) == config


def test_outputs_default_under_a_fresh_timestamped_job_dir():
    config = build()
    assert config.output.job_dir == "runs/run-20260102-030405"
    assert config.output.model_dir == "runs/run-20260102-030405/model"
    assert config.output.checkpoint_dir == "runs/run-20260102-030405/checkpoints"


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--train-fraction", "0"], "--train-fraction"),
        (["--train-fraction", "1.5"], "--train-fraction"),
        (["--dropout", "1"], "--dropout"),
        (["--epochs", "0"], "--epochs"),
        (["--batch-size", "0"], "--batch-size"),
        (["--learning-rate", "-1"], "--learning-rate"),
        (["--max-seq-length", "4"], "--max-seq-length"),
        (["--label-names", "only"], "--label-names"),
        (["--label-names", "a,a"], "--label-names"),
        (["--validation-file", "v.csv", "--validation-fraction", "0.2"], "--validation-fraction"),
        (["--encoder-backend", "hub", "--jit-compile", "on"], "--jit-compile"),
        (["--report-errors", "-1"], "--report-errors"),
    ],
)
def test_bad_values_and_combinations_name_the_flag(argv, flag):
    with pytest.raises(UserError, match=f"^{flag}: "):
        build(*argv)


def test_a_mistyped_flag_suggests_the_right_one():
    with pytest.raises(UserError, match="unknown argument '--learning_rate'.*--learning-rate"):
        build("--learning_rate", "1e-4")


def test_unknown_arguments_are_tolerated_on_vertex():
    config = build("--epochs", "2", "--some-vertex-arg=1", environ={"CLOUD_ML_JOB_ID": "123"})
    assert config.train.epochs == 2


def test_every_config_field_is_a_flag():
    flags = config_lib.accepted_flags()
    for section in config_lib.Config().to_dict().values():
        for name in section:
            assert config_lib.flag_name(name) in flags


def test_help_documents_every_flag_and_exits_zero():
    result = subprocess.run(
        [sys.executable, "-m", "trainer.task", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0
    for flag in ("--training-file", "--encoder", "--class-weights", "--dry-run", "--job-dir"):
        assert flag in result.stdout


def help_of(flag: str) -> str:
    parser = config_lib.build_arg_parser()
    action = next(a for a in parser._actions if flag in a.option_strings)
    return " ".join(action.help.split())


def test_help_describes_every_task_kind():
    """Issue 64, 4: it said "text classification", and that --task auto "is classification"."""
    from trainer import task_registry

    parser = config_lib.build_arg_parser()
    assert "text classification" not in parser.description and "tag each word" in parser.description
    task = help_of("--task")
    assert [name for name in task_registry.names() if f"'{name}'" not in task] == []
    assert (
        "'auto': token-classification when the training file holds tagged sentences (a .conll "
        "or .iob file, or JSON Lines of tokens and tags, or of text and spans), else "
        "classification."
    ) in task


def test_training_file_help_lists_the_tagged_files_the_reader_takes():
    from trainer import reading
    from trainer.tasks.tagging import files

    text = help_of("--training-file")
    assert "--task token-classification" in text and "text and spans" in text
    assert [ext for ext in reading.CONLL_SUFFIXES + files.CONLL_TOO if ext not in text] == []


def test_integer_flags_accept_whole_floats_as_tuning_services_print_them():
    assert build("--batch-size", "32.0").train.batch_size == 32
    with pytest.raises(UserError, match="--batch-size: expected a whole number, got '32.5'"):
        build("--batch-size", "32.5")
