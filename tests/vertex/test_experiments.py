"""--experiment: the chief's run in Vertex AI Experiments, as the real aiplatform SDK sends it to a
loopback Vertex API (tests/helpers/vertex_loopback.py): the flattened config as parameters, one
time-series point per evaluation, metrics.json's final metrics; an Experiments failure is one
warning line and never the run's."""

import pytest
from conftest import metrics_of
from test_task import train_args, trainer_logger_restored
from vertex_loopback import VertexLoopback

from trainer import cli, task
from trainer.vertex import experiments

PROJECT = {"GOOGLE_CLOUD_PROJECT": "my-project", "GOOGLE_CLOUD_REGION": "us-central1"}


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch, tmp_path):
    """No Application Default Credentials anywhere, and no probe of the GCE metadata server."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")


@pytest.fixture
def short_sdk_retry(monkeypatch):
    """The SDK retries a 5xx on reads for 120 s (aiplatform.base._DEFAULT_RETRY); a test of the
    failure needs the failure, not the wait."""
    from google.api_core import retry
    from google.cloud.aiplatform import base

    monkeypatch.setattr(base, "_DEFAULT_RETRY", retry.Retry(initial=0.01, maximum=0.01, timeout=0.05))


def train(tiny_encoder_dir, tiny_data, job_dir, server):
    """trainer.task in this process (the loopback's aiplatform config is this process's), two
    epochs with --experiment sentiment; its exit code."""
    argv = train_args(
        tiny_encoder_dir, tiny_data, str(job_dir), "--epochs", "2", "--batch-size", "16", "--experiment", "sentiment"
    )
    with server.pointed_at("my-project", "us-central1"), trainer_logger_restored():
        return cli.run(lambda args: task.main(args, PROJECT), argv)


def run_context(server) -> dict:
    """What the server holds of the run: its metadata (params, metrics, state)."""
    return server.resources["projects/my-project/locations/us-central1/metadataStores/default/contexts/sentiment-job"][
        "metadata"
    ]


def time_series_points(server) -> list:
    """(step, {metric: value}) of each point written to the run's TensorBoard time series."""
    names = {r["name"].rsplit("/", 1)[-1]: r["displayName"] for n, r in server.resources.items() if "/timeSeries/" in n}
    points = {}
    for request in server.find("POST", "/runs/job:write"):
        for series in request.body["timeSeriesData"]:
            for value in series["values"]:
                points.setdefault(int(value["step"]), {})[names[series["tensorboardTimeSeriesId"]]] = value["scalar"][
                    "value"
                ]
    return sorted(points.items())


@pytest.fixture(scope="module")
def logged_run(tiny_encoder_dir, tiny_data, tmp_path_factory):
    """A two-epoch run with --experiment against a working loopback Vertex API."""
    job_dir = tmp_path_factory.mktemp("experiment") / "job"
    with VertexLoopback() as server:
        code = train(tiny_encoder_dir, tiny_data, job_dir, server)
    return code, server, metrics_of(job_dir)


@pytest.mark.slow  # logged_run: a run of its own (CI's slow line)
def test_a_run_logs_its_flattened_config_as_parameters(logged_run):
    code, server, metrics = logged_run
    assert code == 0
    params = run_context(server)["_params"]
    assert params["train.batch_size"] == 16 and params["train.epochs"] == 2
    assert params["output.experiment"] == "sentiment" and params["model.pooling"] == "mean"


@pytest.mark.slow  # logged_run: a run of its own (CI's slow line)
def test_a_run_logs_one_time_series_point_per_epoch_with_its_validation_metrics(logged_run):
    _, server, metrics = logged_run
    points = time_series_points(server)
    assert [step for step, _ in points] == [1, 2]
    assert {"val_loss", "val_accuracy", "val_macro_f1"} <= set(points[0][1])


@pytest.mark.slow  # logged_run: a run of its own (CI's slow line)
def test_a_run_logs_metrics_jsons_final_metrics_and_completes(logged_run):
    _, server, metrics = logged_run
    context = run_context(server)
    assert context["_metrics"]["test.accuracy"] == pytest.approx(metrics["test"]["accuracy"])
    assert context["_metrics"]["validation.macro_f1"] == pytest.approx(metrics["validation"]["macro_f1"])
    assert context["_state"] == "COMPLETE"


@pytest.mark.slow  # a second training run (about 15 s); test_after_a_failure_no_further_call_is_sent is the fast check
def test_a_failing_experiments_api_costs_one_warning_line_and_the_run_finishes(
    tiny_encoder_dir, tiny_data, tmp_path, short_sdk_retry
):
    with VertexLoopback(fail=True) as server:
        code = train(tiny_encoder_dir, tiny_data, tmp_path / "job", server)
    warnings = [line for line in (tmp_path / "job" / "training.log").read_text().splitlines() if "Experiments" in line]
    assert code == 0 and (tmp_path / "job" / "metrics.json").exists()
    assert len(warnings) == 1 and "training goes on without it" in warnings[0]


def test_after_a_failure_no_further_call_is_sent(short_sdk_retry):
    log = experiments.ExperimentLog("sentiment", "job", "my-project", "us-central1", {"a": 1})
    with VertexLoopback(fail=True) as server, server.pointed_at():
        log.evaluation(1, {"val_loss": 0.5})
        sent = len(server.requests)
        log.evaluation(2, {"val_loss": 0.4})
        log.finish({"test": {"accuracy": 1.0}})
    assert not log.active and len(server.requests) == sent


def test_without_a_project_experiment_is_an_error_before_any_data_is_read(capsys, tmp_path):
    with trainer_logger_restored():
        code = cli.run(
            lambda args: task.main(args, {}),
            ["--training-file", str(tmp_path / "absent.csv"), "--experiment", "sentiment"],
        )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --experiment: no Google Cloud project") and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "job_dir, run",
    [
        ("gs://bucket/runs/vbt-train-20260101-120000", "vbt-train-20260101-120000"),
        ("gs://bucket/runs/vbt-tune-20260101-120000/trial-7/", "vbt-tune-20260101-120000-trial-7"),
        ("runs/My_Run.2", "my-run-2"),
    ],
)
def test_the_run_is_named_after_the_job_directory_in_the_run_name_rule(job_dir, run):
    assert experiments.run_name(job_dir, "sentiment") == run


def test_the_project_and_region_come_from_vertex_before_the_local_environment():
    assert experiments.location(
        {"CLOUD_ML_PROJECT_ID": "job-project", "CLOUD_ML_REGION": "europe-west4", **PROJECT}
    ) == ("job-project", "europe-west4")
    assert experiments.location({}) == (None, "us-central1")
