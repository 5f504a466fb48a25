"""Distillation on Vertex AI (issue #51, 6): --teacher, --teacher-probabilities and --unlabeled-file
reach the cloud trainer untouched when they are on Cloud Storage, and a local one is refused
with one line before anything is submitted: by trainer.submit (train, tune, and so the scripts)
and by the pipeline, whose training step submits the same job."""

import json

import pytest
from test_pipeline_kfp import VERTEX, pipeline_command
from test_scripts import CLOUD, TPU_CLOUD, spec
from test_scripts import run as run_script
from test_submit import WHERE, dry_run, no_credentials, run_submit  # noqa: F401 (autouse: offline)

from trainer import tune
from trainer.tuning import trials

TRAIN = ["--training-file", "gs://my-bucket/data/train.csv"]
TEACHER = "gs://my-bucket/vertex-bert-trainer/teacher-1/model"
# A student of a gs:// teacher, with unlabeled texts (a glob of gz files) and its own settings.
STUDENT = [
    *TRAIN,
    "--teacher",
    TEACHER,
    "--unlabeled-file",
    "gs://my-bucket/data/unlabeled-*.jsonl.gz",
    "--distill-alpha",
    "0.3",
    "--distill-temperature",
    "4",
]
GATE = "validation.accuracy>=0.5"


def container_args(job: dict) -> list:
    """The trainer's arguments in a dry run's CustomJob or HyperparameterTuningJob."""
    (pool,) = (job.get("jobSpec") or job["trialJobSpec"])["workerPoolSpecs"]
    return pool["containerSpec"]["args"]


@pytest.mark.parametrize(
    "flags, local, copy",
    [
        (
            ["--teacher", "runs/teacher/model"],
            "--teacher runs/teacher/model",
            "gcloud storage cp -r runs/teacher/model gs://BUCKET/teachers/",
        ),
        (
            ["--teacher-probabilities", "teacher.csv"],
            "--teacher-probabilities teacher.csv",
            "gcloud storage cp teacher.csv gs://BUCKET/data/",
        ),
        (
            ["--teacher", TEACHER, "--unlabeled-file", "gs://my-bucket/data/u1.csv,data/u2.csv"],
            "--unlabeled-file data/u2.csv",
            "gcloud storage cp data/u2.csv gs://BUCKET/data/",
        ),
    ],
)
@pytest.mark.parametrize("command", ["train", "tune"])
def test_a_local_teacher_or_unlabeled_file_is_refused_in_one_line_naming_the_flag(capsys, command, flags, local, copy):
    code = run_submit([command, *WHERE, "--dry-run", "--", *TRAIN, *flags])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: {local}: a cloud job cannot read files on this machine; copy it "
        f"to Cloud Storage ({copy}) and pass the gs:// path"
    ]


@pytest.mark.parametrize("command, flags", [("train", []), ("train", ["--tpu", "v5e"]), ("tune", [])])
def test_a_gs_teacher_and_unlabeled_files_reach_the_trainer_untouched(capsys, command, flags):
    assert container_args(dry_run(capsys, command, *flags, trainer_args=STUDENT)) == STUDENT


def test_a_gs_teacher_probabilities_file_reaches_the_trainer_untouched(capsys):
    student = [
        *TRAIN,
        "--teacher-probabilities",
        "gs://my-bucket/teachers/llm.jsonl",
        "--unlabeled-file",
        "gs://my-bucket/data/unlabeled.csv",
    ]
    assert container_args(dry_run(capsys, "train", trainer_args=student)) == student


def test_the_pipelines_training_step_receives_the_teacher(capsys):
    code, out, err = pipeline_command(capsys, "run", "--dry-run", "--gate", GATE, *VERTEX, "--", *STUDENT)
    assert code == 0, err
    train = json.loads(out)["pipelineSpec"]["root"]["dag"]["tasks"]["train"]["inputs"]["parameters"]
    assert train["trainer_args"]["runtimeValue"]["constant"] == STUDENT


def test_the_pipeline_refuses_a_local_teacher_before_compiling_anything(capsys):
    code, out, err = pipeline_command(
        capsys, "run", "--dry-run", "--gate", GATE, *VERTEX, "--", *TRAIN, "--teacher", "runs/teacher/model"
    )
    assert (code, out) == (2, "")
    assert len(err) == 1 and err[0].startswith("error: --teacher runs/teacher/model: a cloud job cannot read")


def test_a_local_search_passes_a_local_teacher_to_every_trial():
    """trainer.tune runs on this machine, where a local teacher is readable."""
    student = [
        "--training-file",
        "data/train.csv",
        "--teacher",
        "runs/teacher/model",
        "--unlabeled-file",
        "data/unlabeled.csv",
    ]
    assert tune.check_trainer_args(student, ("learning-rate",)).distillation.teacher == "runs/teacher/model"
    command = trials.trainer_command(student, {"learning-rate": "0.0001"}, "runs/tune-1/trials/0", None)
    assert command[3 : 3 + len(student)] == student


@pytest.mark.slow  # a job script's process each (5-10 s); the tests above check the same specs in-process
@pytest.mark.parametrize(
    "script, settings", [("train-cloud-gpu.sh", CLOUD), ("train-cloud-tpu.sh", TPU_CLOUD), ("tune-cloud.sh", CLOUD)]
)
def test_the_cloud_scripts_pass_the_distillation_flags_through(script, settings):
    assert container_args(spec(run_script(script, *STUDENT, DRY_RUN="1", **settings))) == STUDENT
