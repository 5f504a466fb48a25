"""`python -m trainer.submit --dry-run` prints jobs Vertex AI's own protobuf types accept, with the
right image, machines, arguments and outputs; tuned parameters are flags the trainer parses."""

import json

import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from trainer import cli, config, task_registry
from trainer.cloud import submission
from trainer.tuning import space

IMAGE = "us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer:abc1234"
WHERE = ["--project", "my-project", "--region", "us-central1", "--bucket", "my-bucket", "--image-uri", IMAGE]


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch, tmp_path):
    """No Application Default Credentials anywhere, and no probe of the GCE metadata server."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")


def run_submit(argv):
    """As `python -m trainer.submit` runs it: through the entry points' error wrapper."""
    return cli.run(submission.main, argv)


def dry_run(capsys, command, *flags, trainer_args=("--epochs", "2")):
    code = run_submit([command, *WHERE, *flags, "--dry-run", "--", *trainer_args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def parse(message: dict, proto_type):
    """`message` as one of Vertex's protobuf types: fails on any unknown or mistyped field."""
    return proto_type.wrap(json_format.ParseDict(message, proto_type.pb()()))


def job_spec(job: dict) -> aiplatform_v1.CustomJobSpec:
    parse(job, aiplatform_v1.CustomJob)
    return parse(job["jobSpec"], aiplatform_v1.CustomJobSpec)


def pools(spec):
    return [
        (
            p.machine_spec.machine_type,
            p.machine_spec.accelerator_type.name,
            p.machine_spec.accelerator_count,
            p.replica_count,
        )
        for p in spec.worker_pool_specs
    ]


def test_a_cpu_job(capsys):
    spec = job_spec(dry_run(capsys, "train", "--job-dir", "gs://my-bucket/runs/cpu"))
    assert pools(spec) == [("n1-standard-8", "ACCELERATOR_TYPE_UNSPECIFIED", 0, 1)]
    container = spec.worker_pool_specs[0].container_spec
    assert container.image_uri == IMAGE and list(container.args) == ["--epochs", "2"]
    assert spec.base_output_directory.output_uri_prefix == "gs://my-bucket/runs/cpu"


def test_a_job_with_several_gpus(capsys):
    spec = job_spec(
        dry_run(
            capsys,
            "train",
            "--machine-type",
            "n1-standard-16",
            "--accelerator-type",
            "NVIDIA_TESLA_T4",
            "--accelerator-count",
            "2",
        )
    )
    assert pools(spec) == [("n1-standard-16", "NVIDIA_TESLA_T4", 2, 1)]


def test_a_gpu_type_alone_means_one_gpu(capsys):
    spec = job_spec(dry_run(capsys, "train", "--accelerator-type", "NVIDIA_L4", "--machine-type", "g2-standard-8"))
    assert pools(spec) == [("g2-standard-8", "NVIDIA_L4", 1, 1)]


def test_a_multi_worker_job_is_a_chief_pool_and_a_worker_pool(capsys):
    spec = job_spec(
        dry_run(
            capsys,
            "train",
            "--accelerator-type",
            "NVIDIA_TESLA_T4",
            "--replica-count",
            "3",
            trainer_args=("--distribution", "multiworker"),
        )
    )
    assert pools(spec) == [("n1-standard-8", "NVIDIA_TESLA_T4", 1, 1), ("n1-standard-8", "NVIDIA_TESLA_T4", 1, 3)]
    for pool in spec.worker_pool_specs:
        assert pool.container_spec.image_uri == IMAGE
        assert list(pool.container_spec.args) == ["--distribution", "multiworker"]


@pytest.mark.parametrize("version, accelerator", [("v2", "TPU_V2"), ("v3", "TPU_V3")])
def test_a_tpu_job_runs_on_one_8_core_tpu_vm(capsys, version, accelerator):
    spec = job_spec(dry_run(capsys, "train", "--tpu", version))
    assert pools(spec) == [("cloud-tpu", accelerator, 8, 1)]


@pytest.mark.parametrize("chips", ["1", "4", "8"])
def test_a_tpu_v5e_job_runs_on_a_ct5lp_machine_with_that_many_chips(capsys, chips):
    spec = job_spec(dry_run(capsys, "train", "--tpu", "v5e", "--tpu-chips", chips))
    assert pools(spec) == [(f"ct5lp-hightpu-{chips}t", "TPU_V5_LITEPOD", int(chips), 1)]


def test_a_tpu_v5e_job_defaults_to_four_chips(capsys):
    spec = job_spec(dry_run(capsys, "train", "--tpu", "v5e"))
    assert pools(spec) == [("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, 1)]


def test_a_tpu_v5e_job_switches_tensorflow_to_the_pjrt_runtime(capsys):
    container = job_spec(dry_run(capsys, "train", "--tpu", "v5e")).worker_pool_specs[0].container_spec
    assert {e.name: e.value for e in container.env} == {
        "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
        "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/lib/libtpu.so",
        "PJRT_DEVICE": "TPU",
    }


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_a_tpu_v2_or_v3_job_keeps_tensorflows_default_runtime(capsys, version):
    container = job_spec(dry_run(capsys, "train", "--tpu", version)).worker_pool_specs[0].container_spec
    assert list(container.env) == []


def test_outputs_default_to_a_directory_named_after_the_job(capsys):
    job = dry_run(capsys, "train", "--bucket", "gs://my-bucket/team/", "--display-name", "sentiment-1")
    assert job["displayName"] == "sentiment-1"
    assert (
        job_spec(job).base_output_directory.output_uri_prefix == "gs://my-bucket/team/vertex-bert-trainer/sentiment-1"
    )


def test_a_tuning_job_optimizes_the_trainers_metric_over_its_flags(capsys):
    job = dry_run(
        capsys,
        "tune",
        "--accelerator-type",
        "NVIDIA_TESLA_T4",
        "--max-trial-count",
        "8",
        "--parallel-trial-count",
        "2",
        "--job-dir",
        "gs://my-bucket/tuning",
        trainer_args=("--max-seq-length", "64"),
    )
    parse(job, aiplatform_v1.HyperparameterTuningJob)
    study = parse(job["studySpec"], aiplatform_v1.StudySpec)
    assert [(m.metric_id, m.goal.name) for m in study.metrics] == [(task_registry.default_metric(), "MAXIMIZE")]
    assert [p.parameter_id for p in study.parameters] == list(space.TUNED_FLAGS)
    assert (job["maxTrialCount"], job["parallelTrialCount"]) == (8, 2)
    trial = parse(job["trialJobSpec"], aiplatform_v1.CustomJobSpec)
    assert pools(trial) == [("n1-standard-8", "NVIDIA_TESLA_T4", 1, 1)]
    assert trial.worker_pool_specs[0].container_spec.image_uri == IMAGE
    assert list(trial.worker_pool_specs[0].container_spec.args) == ["--max-seq-length", "64"]
    # Vertex puts each trial's AIP_* directories under <base>/<trial id>/.
    assert trial.base_output_directory.output_uri_prefix == "gs://my-bucket/tuning"


def test_the_tuning_goal_follows_the_trainers_selection_metric(capsys):
    job = dry_run(
        capsys, "tune", "--parameters", "learning-rate,dropout", trainer_args=("--hypertune-metric", "val_loss")
    )
    assert job["studySpec"]["metrics"] == [{"metricId": "val_loss", "goal": "MINIMIZE"}]
    assert [p["parameterId"] for p in job["studySpec"]["parameters"]] == ["learning-rate", "dropout"]


def candidate_values(spec):
    """Every value a trial can receive at the edges of the space, as Vertex prints it."""
    return [str(v) for v in getattr(spec, "values", None) or (spec.min, spec.max)]


@pytest.mark.parametrize("name", space.TUNED_FLAGS)
def test_tuning_parameter_ids_are_flags_the_trainer_parses(name):
    assert "--" + name in config.accepted_flags()
    specs = submission.tuning_parameters()
    assert list(specs) == list(space.TUNED_FLAGS)
    field = name.replace("-", "_")
    for value in candidate_values(specs[name]):
        parsed = config.build_config([f"--{name}={value}"], environ={})
        section = next(s for s in ("train", "model", "data") if hasattr(getattr(parsed, s), field))
        assert getattr(getattr(parsed, section), field) == type(getattr(getattr(parsed, section), field))(value)


@pytest.mark.parametrize(
    "flags, trainer_args, message",
    [
        (["--tpu", "v3", "--accelerator-type", "NVIDIA_TESLA_T4"], [], "--tpu"),
        (["--tpu", "v2", "--replica-count", "1"], [], "--replica-count"),
        (["--accelerator-type", "NVIDIA_T4"], [], "NVIDIA_TESLA_T4"),
        (["--accelerator-type", "TPU_V3"], [], "--tpu v2, v3, v5e"),
        (["--tpu", "v3", "--tpu-chips", "4"], [], "--tpu-chips: TPU v3 comes as one 8-core VM"),
        (["--tpu-chips", "4"], [], "--tpu-chips needs --tpu v5e"),
        (["--tpu", "v5e", "--tpu-chips", "2"], [], "--tpu-chips: Vertex offers TPU v5e with 1, 4, 8 chips, got 2"),
        (["--tpu", "v5e", "--replica-count", "1"], [], "--replica-count"),
        (["--accelerator-count", "2"], [], "--accelerator-type"),
        (["--job-dir", "/tmp/run"], [], "gs://"),
        (["--bucket", "s3://elsewhere"], [], "--bucket"),
        (["--region", "moon-central1"], [], "--region"),
        (["--tensorboard", "projects/p/locations/l/tensorboards/1"], [], "--service-account"),
        ([], ["--learnin-rate", "1e-4"], "--learning-rate"),
        ([], ["--job-dir", "gs://b/x"], "Set JOB_DIR for the scripts (trainer.submit --job-dir)"),
        ([], ["--training-file", "../data/train.csv"], "--training-file ../data/train.csv: a cloud job cannot read"),
        (
            [],
            ["--training-file", "gs://b/train.csv", "--validation-file", "gs://b/dev.csv,dev2.csv"],
            "--validation-file dev2.csv",
        ),
        ([], ["--training-file", "gs://b/train.csv", "--testing-file", "data/test.tsv"], "gcloud storage cp"),
        ([], ["--epochs", "0"], "--epochs"),
    ],
)
def test_bad_requests_fail_before_submission_naming_the_flag(capsys, flags, trainer_args, message):
    code = run_submit(["train", *WHERE, *flags, "--dry-run", "--", *trainer_args])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "flags, trainer_args, message",
    [
        ([], ["--learning-rate=1e-4"], "--learning-rate is tuned"),
        (["--parameters", "learning-rate,momentum"], [], "--parameters"),
        (["--max-trial-count", "2", "--parallel-trial-count", "3"], [], "--parallel-trial-count"),
    ],
)
def test_bad_tuning_requests_fail_naming_the_flag(capsys, flags, trainer_args, message):
    assert run_submit(["tune", *WHERE, *flags, "--dry-run", "--", *trainer_args]) == 2
    assert message in capsys.readouterr().err


def test_without_credentials_a_real_submission_fails_with_one_clear_message(capsys):
    code = run_submit(["train", *WHERE, "--", "--epochs", "1"])
    err = capsys.readouterr().err
    assert code == 2  # the user can fix it (issue #23, 4): README's exit codes
    assert "no Google Cloud credentials" in err and "gcloud auth application-default login" in err
    assert "Traceback" not in err


def test_missing_required_flags_are_named(capsys):
    assert cli.run(submission.main, ["tune", "--project", "p"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the following arguments are required: --region") and len(err.splitlines()) == 1


@pytest.mark.parametrize("command, spec_key", [("train", "jobSpec"), ("tune", "trialJobSpec")])
def test_the_dry_run_shows_the_service_account_and_tensorboard_that_are_submitted(capsys, command, spec_key):
    tensorboard = "projects/my-project/locations/us-central1/tensorboards/7"
    job = dry_run(
        capsys,
        command,
        "--service-account",
        "trainer@my-project.iam.gserviceaccount.com",
        "--tensorboard",
        tensorboard,
        trainer_args=(),
    )
    parse(job, aiplatform_v1.CustomJob if command == "train" else aiplatform_v1.HyperparameterTuningJob)
    assert job[spec_key]["serviceAccount"] == "trainer@my-project.iam.gserviceaccount.com"
    assert job[spec_key]["tensorboard"] == tensorboard


def test_the_submission_passes_the_same_run_settings_the_dry_run_shows(capsys, monkeypatch):
    sent = {}
    from google.cloud import aiplatform

    monkeypatch.setattr(aiplatform.CustomJob, "run", lambda self, **kwargs: sent.update(kwargs))
    real_credentials = submission.api.credentials
    monkeypatch.setattr(submission.api, "credentials", lambda dry_run: real_credentials(True))  # offline
    assert (
        run_submit(["train", *WHERE, "--service-account", "sa@p.iam.gserviceaccount.com", "--", "--epochs", "1"]) == 0
    )
    assert sent == {"service_account": "sa@p.iam.gserviceaccount.com", "tensorboard": None}


def test_gs_data_files_are_accepted(capsys):
    job = dry_run(
        capsys,
        "train",
        trainer_args=("--training-file", "gs://b/a.csv,gs://b/b.csv", "--validation-file", "gs://b/dev.csv"),
    )
    assert job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"][:2] == [
        "--training-file",
        "gs://b/a.csv,gs://b/b.csv",
    ]


@pytest.mark.parametrize("image", ["my-image:latest", "docker.io/library/python:3.11", "us-central1-docker.pkg.dev"])
def test_an_image_vertex_cannot_pull_gets_a_warning(capsys, image):
    code = run_submit(["train", *WHERE, "--image-uri", image, "--dry-run", "--", "--epochs", "1"])
    err = capsys.readouterr().err
    assert code == 0
    assert f"warning: --image-uri {image!r}" in err and "REGION-docker.pkg.dev" in err


@pytest.mark.parametrize(
    "image",
    [
        IMAGE,
        "gcr.io/my-project/trainer:v1",
        "eu.gcr.io/p/trainer",
        "europe-west4-docker.pkg.dev/p/r/i@sha256:" + "a" * 64,
    ],
)
def test_registry_images_pass_without_a_warning(capsys, image):
    assert run_submit(["train", *WHERE, "--image-uri", image, "--dry-run"]) == 0
    assert "warning" not in capsys.readouterr().err


# --- scheduling: standard, Spot and flex-start (issue 40, 1) ------------------------------------

L4 = ("--machine-type", "g2-standard-8", "--accelerator-type", "NVIDIA_L4")


def scheduling(capsys, command, *flags, trainer_args=()):
    """The job's scheduling as Vertex's own Scheduling type (None: the spec sends none)."""
    job = dry_run(capsys, command, *flags, trainer_args=trainer_args)
    parse(job, aiplatform_v1.CustomJob if command == "train" else aiplatform_v1.HyperparameterTuningJob)
    spec = job["jobSpec"] if command == "train" else job["trialJobSpec"]
    return parse(spec["scheduling"], aiplatform_v1.Scheduling) if "scheduling" in spec else None


@pytest.mark.parametrize(
    "command, machines",
    [
        ("train", ("--accelerator-type", "NVIDIA_TESLA_T4")),
        ("train", ("--tpu", "v3")),
        ("train", ("--tpu", "v5e", "--tpu-chips", "8")),
        ("tune", ("--accelerator-type", "NVIDIA_TESLA_T4")),
    ],
)
def test_a_spot_job_runs_on_spot_vms_and_restarts_on_preemption(capsys, command, machines):
    spec = scheduling(capsys, command, *machines, "--scheduling", "spot")
    assert spec.strategy == aiplatform_v1.Scheduling.Strategy.SPOT
    assert spec.restart_job_on_worker_restart  # the trainer resumes from its last epoch
    assert "max_wait_duration" not in spec


@pytest.mark.parametrize("command", ["train", "tune"])
def test_a_flex_start_job_queues_for_its_gpus_at_most_max_wait(capsys, command):
    spec = scheduling(capsys, command, *L4, "--scheduling", "flex-start", "--max-wait", "2h")
    assert spec.strategy == aiplatform_v1.Scheduling.Strategy.FLEX_START
    assert spec.max_wait_duration.total_seconds() == 7200
    assert spec.restart_job_on_worker_restart


def test_a_flex_start_tpu_job_is_specified_with_a_warning_that_vertex_documents_gpus_only(capsys):
    spec = scheduling(capsys, "train", "--tpu", "v5e", "--scheduling", "flex-start", "--max-wait", "1h")
    assert spec.strategy == aiplatform_v1.Scheduling.Strategy.FLEX_START
    assert spec.max_wait_duration.total_seconds() == 3600
    code = run_submit(["train", *WHERE, "--tpu", "v5e", "--scheduling", "flex-start", "--dry-run"])
    assert code == 0 and "warning: --scheduling flex-start with TPU v5e" in capsys.readouterr().err


def test_a_flex_start_job_without_max_wait_leaves_vertexs_one_day_default(capsys):
    spec = scheduling(capsys, "train", *L4, "--scheduling", "flex-start")
    assert spec.strategy == aiplatform_v1.Scheduling.Strategy.FLEX_START and "max_wait_duration" not in spec


@pytest.mark.parametrize(
    "text, seconds",
    [("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("1d", 86400), ("90s", 90), ("3600", 3600), ("0", 0)],
)
def test_max_wait_takes_units_or_seconds(text, seconds):
    assert submission.scheduling.parse_duration(text) == seconds


def test_zero_max_wait_is_sent_as_zero_which_vertex_reads_as_no_limit(capsys):
    job = dry_run(capsys, "train", *L4, "--scheduling", "flex-start", "--max-wait", "0")
    assert job["jobSpec"]["scheduling"]["maxWaitDuration"] == "0s"


@pytest.mark.parametrize("flags", [(), ("--scheduling", "standard")])
def test_a_standard_job_sends_no_scheduling_which_vertex_reads_as_on_demand(capsys, flags):
    assert scheduling(capsys, "train", *flags) is None


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--scheduling", "cheap"], "--scheduling: invalid choice: 'cheap'"),
        (
            ["--scheduling", "spot", "--max-wait", "1h"],
            "--max-wait (MAX_WAIT for the scripts) is how long a flex-start",
        ),
        (["--max-wait", "1h"], "needs --scheduling flex-start (SCHEDULING=flex-start), not standard"),
        (
            [*L4, "--scheduling", "flex-start", "--max-wait", "2 hours"],
            "--max-wait (MAX_WAIT for the scripts): expected a duration",
        ),
        ([*L4, "--scheduling", "flex-start", "--max-wait", "1.5h"], "got '1.5h'"),
        (["--scheduling", "flex-start"], "not a CPU-only job"),
    ],
)
def test_bad_scheduling_fails_before_submission_in_one_line(capsys, flags, message):
    code = run_submit(["train", *WHERE, *flags, "--dry-run", "--", "--epochs", "1"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err


def test_flex_start_on_a_gpu_vertex_does_not_list_for_it_gets_a_warning(capsys):
    code = run_submit(
        ["train", *WHERE, "--accelerator-type", "NVIDIA_TESLA_T4", "--scheduling", "flex-start", "--dry-run"]
    )
    assert code == 0
    assert (
        "warning: --scheduling flex-start with NVIDIA_TESLA_T4: Vertex AI documents flex-start for "
        "NVIDIA_L4" in capsys.readouterr().err
    )


class Sent(Exception):
    """Stops the SDK at the request it would send to Vertex."""


@pytest.mark.parametrize("command", ["train", "tune"])
def test_the_sdk_submits_the_scheduling_the_dry_run_shows(capsys, monkeypatch, command):
    """The dry run renders the Scheduling message itself; the SDK's own submit() builds the one
    it sends from run()'s arguments. Both, for the same flags, are one message."""
    from google.cloud.aiplatform_v1.services.job_service import JobServiceClient

    sent = {}

    def create(self, *, parent, timeout=None, **job):
        (message,) = job.values()
        spec = message.job_spec if command == "train" else message.trial_job_spec
        sent["scheduling"] = json_format.MessageToDict(aiplatform_v1.Scheduling.pb(spec.scheduling))
        raise Sent

    monkeypatch.setattr(JobServiceClient, "create_custom_job", create)
    monkeypatch.setattr(JobServiceClient, "create_hyperparameter_tuning_job", create)
    real_credentials = submission.api.credentials
    monkeypatch.setattr(submission.api, "credentials", lambda dry_run: real_credentials(True))  # offline
    flags = [*L4, "--scheduling", "flex-start", "--max-wait", "45m"]
    shown = dry_run(capsys, command, *flags, trainer_args=())
    with pytest.raises(Sent):
        run_submit([command, *WHERE, *flags])
    assert (
        sent["scheduling"]
        == (shown.get("jobSpec") or shown["trialJobSpec"])["scheduling"]
        == {"strategy": "FLEX_START", "maxWaitDuration": "2700s", "restartJobOnWorkerRestart": True}
    )
