"""`python -m trainer.submit deploy | batch-predict --dry-run` prints requests Vertex AI's own v1
protobuf types accept: the job's model/ with the serving image and its routes, an endpoint, a
deployment with machines and replicas, a batch prediction job over gs:// files."""
import json

import pytest
from google.cloud import aiplatform_v1 as v1
from google.protobuf import json_format

from trainer import cli
from trainer.cloud import environment as vertex, submit

PARENT = "projects/my-project/locations/us-central1"
WHERE = ["--project", "my-project", "--region", "us-central1"]
IMAGE = "us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer-serve:abc1234"
MODEL = ["--job-dir", "gs://my-bucket/runs/sentiment", "--image-uri", IMAGE]


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch, tmp_path):
    """No Application Default Credentials anywhere, and no probe of the GCE metadata server."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")


def dry_run(capsys, *argv) -> dict:
    code = cli.run(submit.main, [*argv, "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def parse(message: dict, proto_type):
    """`message` as one of Vertex's protobuf types: fails on any unknown or mistyped field."""
    return proto_type.wrap(json_format.ParseDict(message, proto_type.pb()()))


def failure(capsys, *argv):
    code = cli.run(submit.main, list(argv))
    return code, capsys.readouterr().err


def test_deploy_uploads_the_jobs_model_with_the_serving_images_contract(capsys):
    requests = dry_run(capsys, "deploy", *WHERE, *MODEL, "--display-name", "sentiment")
    upload = parse(requests["uploadModel"], v1.UploadModelRequest)
    assert upload.parent == PARENT
    assert upload.model.artifact_uri == "gs://my-bucket/runs/sentiment/model"
    container = upload.model.container_spec
    serving = vertex.ServingEnvironment()
    assert container.image_uri == IMAGE
    assert [p.container_port for p in container.ports] == [serving.port]
    assert (container.predict_route, container.health_route) == (serving.predict_route, serving.health_route)


def test_deploy_creates_an_endpoint_and_deploys_with_machines_and_replicas(capsys):
    requests = dry_run(capsys, "deploy", *WHERE, *MODEL, "--machine-type", "n1-standard-8",
                       "--min-replicas", "1", "--max-replicas", "3")
    endpoint = parse(requests["createEndpoint"], v1.CreateEndpointRequest)
    deploy = parse(requests["deployModel"], v1.DeployModelRequest)
    assert endpoint.parent == PARENT
    assert deploy.endpoint.startswith(PARENT + "/endpoints/")
    assert deploy.deployed_model.model.startswith(PARENT + "/models/")
    resources = deploy.deployed_model.dedicated_resources
    assert (resources.machine_spec.machine_type, resources.min_replica_count, resources.max_replica_count) == \
        ("n1-standard-8", 1, 3)
    assert dict(deploy.traffic_split) == {"0": 100}


def test_deploy_to_an_existing_endpoint_creates_none(capsys):
    requests = dry_run(capsys, "deploy", *WHERE, *MODEL, "--endpoint", "987")
    assert "createEndpoint" not in requests
    assert parse(requests["deployModel"], v1.DeployModelRequest).endpoint == PARENT + "/endpoints/987"


def test_batch_predict_over_json_lines_sends_each_lines_text_field(capsys):
    requests = dry_run(capsys, "batch-predict", *WHERE, "--model", "555", "--input", "gs://b/in/*.jsonl",
                       "--output", "gs://b/out", "--text-field", "tweet", "--replicas", "2", "--max-replicas", "4")
    assert "uploadModel" not in requests
    job = parse(requests["createBatchPredictionJob"], v1.CreateBatchPredictionJobRequest).batch_prediction_job
    assert job.model == PARENT + "/models/555"
    assert job.input_config.instances_format == "jsonl"
    assert list(job.input_config.gcs_source.uris) == ["gs://b/in/*.jsonl"]
    assert (job.instance_config.instance_type, list(job.instance_config.included_fields)) == ("array", ["tweet"])
    assert (job.output_config.predictions_format, job.output_config.gcs_destination.output_uri_prefix) == \
        ("jsonl", "gs://b/out")
    assert (job.dedicated_resources.starting_replica_count, job.dedicated_resources.max_replica_count) == (2, 4)


def test_batch_predict_over_csv_uploads_the_jobs_model_first(capsys):
    requests = dry_run(capsys, "batch-predict", *WHERE, *MODEL, "--input", "gs://b/in/a.csv", "gs://b/in/b.csv",
                       "--output", "gs://b/out")
    upload = parse(requests["uploadModel"], v1.UploadModelRequest)
    job = parse(requests["createBatchPredictionJob"], v1.CreateBatchPredictionJobRequest).batch_prediction_job
    assert upload.model.artifact_uri == "gs://my-bucket/runs/sentiment/model"
    assert job.input_config.instances_format == "csv"
    assert (job.instance_config.instance_type, list(job.instance_config.included_fields)) == ("", ["text"])


@pytest.mark.parametrize("argv, message", [
    (["deploy", *WHERE, "--image-uri", IMAGE], "--job-dir and --image-uri"),
    (["deploy", *WHERE, "--job-dir", "/local/run", "--image-uri", IMAGE], "--job-dir: expected a Cloud Storage path"),
    (["deploy", *WHERE, *MODEL, "--min-replicas", "3", "--max-replicas", "2"], "--min-replicas/--max-replicas"),
    (["deploy", *WHERE, *MODEL, "--", "--epochs", "2"], "takes no trainer arguments"),
    (["batch-predict", *WHERE, "--model", "5", "--input", "gs://b/a.jsonl", "gs://b/b.csv", "--output", "gs://b/o"],
     "all of one kind"),
    (["batch-predict", *WHERE, "--model", "5", "--input", "gs://b/a.parquet", "--output", "gs://b/o"],
     "expected .jsonl or .csv"),
    (["batch-predict", *WHERE, "--model", "5", "--input", "gs://b/a.csv", "--output", "out/"], "--output: expected"),
    (["batch-predict", *WHERE, "--model", "5", *MODEL, "--input", "gs://b/a.csv", "--output", "gs://b/o"],
     "not both"),
    (["deploy", "--project", "p", "--region", "mars-north1", *MODEL], "--region"),
    # the docs' placeholders, copied literally (issue #23, 5)
    (["batch-predict", *WHERE, "--model", "MODEL_ID", "--input", "gs://b/a.csv", "--output", "gs://b/o"],
     "--model: 'MODEL_ID' is a placeholder"),
    (["deploy", *WHERE, *MODEL, "--endpoint", "ENDPOINT_ID"], "--endpoint: 'ENDPOINT_ID' is a placeholder"),
])
def test_a_bad_flag_is_one_error_line_before_anything_is_sent(capsys, argv, message):
    code, err = failure(capsys, *argv, "--dry-run")
    assert code == 2
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("command", [["deploy", *WHERE, *MODEL],
                                     ["batch-predict", *WHERE, "--model", "5", "--input", "gs://b/a.csv",
                                      "--output", "gs://b/o"]])
def test_without_credentials_a_real_run_is_one_line_and_exit_2(capsys, command):
    code, err = failure(capsys, *command)
    assert code == 2  # the user can fix it (issue #23, 4): README's exit codes
    assert err.startswith("error: no Google Cloud credentials found") and len(err.splitlines()) == 1


@pytest.mark.parametrize("error, code", [("PermissionDenied", 2), ("NotFound", 2), ("ServiceUnavailable", 1),
                                         ("InternalServerError", 1)])
def test_a_refusal_the_user_can_fix_exits_2_and_a_cloud_failure_exits_1(error, code):
    from google.api_core import exceptions
    from trainer.cloud import api
    from trainer.errors import UserError
    with pytest.raises(UserError) as raised:
        with api.google_errors():
            raise getattr(exceptions, error)("nope")
    assert raised.value.exit_code == code and str(raised.value).startswith("Vertex AI refused the request")


@pytest.mark.parametrize("precision", ["auto", "bfloat16"])
def test_deploy_passes_the_precision_to_the_serving_container(capsys, precision):
    requests = dry_run(capsys, "deploy", *WHERE, *MODEL, "--precision", precision)
    container = parse(requests["uploadModel"], v1.UploadModelRequest).model.container_spec
    assert list(container.args) == ["--precision", precision]
