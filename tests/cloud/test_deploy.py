"""`python -m trainer.deploy` (= `trainer.submit deploy`) and `trainer.submit batch-predict`.

--dry-run prints requests Vertex AI's own v1 protobuf types accept: the job's model/ with the
serving image and its routes, as a new version of a registered model with aliases and the run's
labels, an endpoint, a deployment with machines, replicas and a traffic split, a batch prediction
job over gs:// files. Against a loopback Vertex API (tests/helpers/vertex_loopback.py) the real SDK
clients send them: a canary's 90/10 split, a promotion's 0/100 and `default` alias.
"""

import json

import pytest
from google.cloud import aiplatform_v1 as v1
from google.protobuf import json_format
from vertex_loopback import VertexLoopback

from trainer import cli, storage
from trainer import deploy as deploy_command
from trainer.cloud import submission
from trainer.vertex import environment as vertex

PARENT = "projects/my-project/locations/us-central1"
WHERE = ["--project", "my-project", "--region", "us-central1"]
IMAGE = "us-central1-docker.pkg.dev/my-project/vertex-bert-trainer/vertex-bert-trainer-serve:abc1234"
MODEL = ["--job-dir", "gs://my-bucket/runs/sentiment", "--image-uri", IMAGE]
# What the job's metrics.json holds, of what the registered version's labels carry.
RUN_METRICS = {
    "task": "classification",
    "data_hash": "3f2a9c0d1e4b5a6f",
    "validation": {"examples": 30, "loss": 0.31, "accuracy": 0.9, "macro_f1": 0.87312},
    "test": {"examples": 30, "loss": 0.35, "accuracy": 0.8667, "macro_f1": 0.85},
}
PARENT_MODEL = PARENT + "/models/100"
ENDPOINT = PARENT + "/endpoints/987"


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch, tmp_path):
    """No Application Default Credentials anywhere, and no probe of the GCE metadata server."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")


@pytest.fixture(autouse=True)
def finished_job(monkeypatch):
    """gs://my-bucket/runs/sentiment holds a finished run's metrics.json, as a real run reads it
    (reading gs:// itself is tests/test_gcs.py's subject)."""
    files = {"gs://my-bucket/runs/sentiment/metrics.json": json.dumps(RUN_METRICS).encode()}
    real = storage.read_bytes
    monkeypatch.setattr(storage, "read_bytes", lambda path: files[path] if path in files else real(path))


def dry_run(capsys, *argv) -> dict:
    code = cli.run(submission.main, [*argv, "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def parse(message: dict, proto_type):
    """`message` as one of Vertex's protobuf types: fails on any unknown or mistyped field."""
    return proto_type.wrap(json_format.ParseDict(message, proto_type.pb()()))


def failure(capsys, *argv):
    code = cli.run(submission.main, list(argv))
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
    requests = dry_run(
        capsys,
        "deploy",
        *WHERE,
        *MODEL,
        "--machine-type",
        "n1-standard-8",
        "--min-replicas",
        "1",
        "--max-replicas",
        "3",
    )
    endpoint = parse(requests["createEndpoint"], v1.CreateEndpointRequest)
    deploy = parse(requests["deployModel"], v1.DeployModelRequest)
    assert endpoint.parent == PARENT
    assert deploy.endpoint.startswith(PARENT + "/endpoints/")
    assert deploy.deployed_model.model.startswith(PARENT + "/models/")
    resources = deploy.deployed_model.dedicated_resources
    assert (resources.machine_spec.machine_type, resources.min_replica_count, resources.max_replica_count) == (
        "n1-standard-8",
        1,
        3,
    )
    assert dict(deploy.traffic_split) == {"0": 100}


def test_deploy_to_an_existing_endpoint_creates_none(capsys):
    requests = dry_run(capsys, "deploy", *WHERE, *MODEL, "--endpoint", "987")
    assert "createEndpoint" not in requests
    assert parse(requests["deployModel"], v1.DeployModelRequest).endpoint == PARENT + "/endpoints/987"


def test_batch_predict_over_json_lines_sends_each_lines_text_field(capsys):
    requests = dry_run(
        capsys,
        "batch-predict",
        *WHERE,
        "--model",
        "555",
        "--input",
        "gs://b/in/*.jsonl",
        "--output",
        "gs://b/out",
        "--text-field",
        "tweet",
        "--replicas",
        "2",
        "--max-replicas",
        "4",
    )
    assert "uploadModel" not in requests
    job = parse(requests["createBatchPredictionJob"], v1.CreateBatchPredictionJobRequest).batch_prediction_job
    assert job.model == PARENT + "/models/555"
    assert job.input_config.instances_format == "jsonl"
    assert list(job.input_config.gcs_source.uris) == ["gs://b/in/*.jsonl"]
    assert (job.instance_config.instance_type, list(job.instance_config.included_fields)) == ("array", ["tweet"])
    assert (job.output_config.predictions_format, job.output_config.gcs_destination.output_uri_prefix) == (
        "jsonl",
        "gs://b/out",
    )
    assert (job.dedicated_resources.starting_replica_count, job.dedicated_resources.max_replica_count) == (2, 4)


def test_batch_predict_over_csv_uploads_the_jobs_model_first(capsys):
    requests = dry_run(
        capsys,
        "batch-predict",
        *WHERE,
        *MODEL,
        "--input",
        "gs://b/in/a.csv",
        "gs://b/in/b.csv",
        "--output",
        "gs://b/out",
    )
    upload = parse(requests["uploadModel"], v1.UploadModelRequest)
    job = parse(requests["createBatchPredictionJob"], v1.CreateBatchPredictionJobRequest).batch_prediction_job
    assert upload.model.artifact_uri == "gs://my-bucket/runs/sentiment/model"
    assert job.input_config.instances_format == "csv"
    assert (job.instance_config.instance_type, list(job.instance_config.included_fields)) == ("", ["text"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["deploy", *WHERE, "--image-uri", IMAGE], "--job-dir and --image-uri"),
        (["deploy", *WHERE, *MODEL, "--min-replicas", "3", "--max-replicas", "2"], "--min-replicas/--max-replicas"),
        (["deploy", *WHERE, *MODEL, "--", "--epochs", "2"], "takes no trainer arguments"),
        (
            [
                "batch-predict",
                *WHERE,
                "--model",
                "5",
                "--input",
                "gs://b/a.jsonl",
                "gs://b/b.csv",
                "--output",
                "gs://b/o",
            ],
            "all of one kind",
        ),
        (
            ["batch-predict", *WHERE, "--model", "5", "--input", "gs://b/a.parquet", "--output", "gs://b/o"],
            "expected .jsonl or .csv",
        ),
        (
            ["batch-predict", *WHERE, "--model", "5", "--input", "gs://b/a.csv", "--output", "out/"],
            "--output: expected",
        ),
        (
            ["batch-predict", *WHERE, "--model", "5", *MODEL, "--input", "gs://b/a.csv", "--output", "gs://b/o"],
            "not both",
        ),
        (["deploy", "--project", "p", "--region", "mars-north1", *MODEL], "--region"),
        # the docs' placeholders, copied literally (issue #23, 5)
        (
            ["batch-predict", *WHERE, "--model", "MODEL_ID", "--input", "gs://b/a.csv", "--output", "gs://b/o"],
            "--model: 'MODEL_ID' is a placeholder",
        ),
        (["deploy", *WHERE, *MODEL, "--endpoint", "ENDPOINT_ID"], "--endpoint: 'ENDPOINT_ID' is a placeholder"),
    ],
)
def test_a_bad_flag_is_one_error_line_before_anything_is_sent(capsys, argv, message):
    code, err = failure(capsys, *argv, "--dry-run")
    assert code == 2
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "image, which",
    [
        ("us-central1-docker.pkg.dev/p/vertex-bert-trainer/vertex-bert-trainer:abc1234", "the GPU image"),
        (
            "us-central1-docker.pkg.dev/p/vertex-bert-trainer/vertex-bert-trainer-tpu@sha256:" + "0" * 64,
            "the TPU image",
        ),
    ],
)
@pytest.mark.parametrize(
    "command", [["deploy", *WHERE], ["batch-predict", *WHERE, "--input", "gs://b/a.csv", "--output", "gs://b/o"]]
)
def test_a_training_image_as_the_serving_image_is_refused_as_deploy_sh_refuses_it(capsys, image, which, command):
    code, err = failure(
        capsys, *command, "--job-dir", "gs://my-bucket/runs/sentiment", "--image-uri", image, "--dry-run"
    )
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"error: --image-uri {image} is {which}"), err
    assert f"{command[0]} needs the serving image (VARIANT=serve scripts/build-image.sh)" in err


@pytest.mark.parametrize(
    "command",
    [
        ["deploy", *WHERE, *MODEL],
        ["batch-predict", *WHERE, "--model", "5", "--input", "gs://b/a.csv", "--output", "gs://b/o"],
    ],
)
def test_without_credentials_a_real_run_is_one_line_and_exit_2(capsys, command):
    code, err = failure(capsys, *command)
    assert code == 2  # the user can fix it (issue #23, 4): README's exit codes
    assert err.startswith("error: no Google Cloud credentials found") and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "error, code", [("PermissionDenied", 2), ("NotFound", 2), ("ServiceUnavailable", 1), ("InternalServerError", 1)]
)
def test_a_refusal_the_user_can_fix_exits_2_and_a_cloud_failure_exits_1(error, code):
    from google.api_core import exceptions

    from trainer.errors import UserError
    from trainer.vertex import api

    with pytest.raises(UserError) as raised:
        with api.google_errors():
            raise getattr(exceptions, error)("nope")
    assert raised.value.exit_code == code and str(raised.value).startswith("Vertex AI refused the request")


@pytest.mark.parametrize("precision", ["auto", "bfloat16"])
def test_deploy_passes_the_precision_to_the_serving_container(capsys, precision):
    requests = dry_run(capsys, "deploy", *WHERE, *MODEL, "--precision", precision)
    container = parse(requests["uploadModel"], v1.UploadModelRequest).model.container_spec
    assert list(container.args) == ["--precision", precision]


def test_a_real_upload_needs_the_job_dir_on_cloud_storage(capsys):
    code, err = failure(capsys, "deploy", *WHERE, "--job-dir", "/local/run", "--image-uri", IMAGE)
    assert code == 2 and err.startswith("error: --job-dir: expected a Cloud Storage path")


@pytest.fixture
def local_job(tmp_path) -> list:
    """--job-dir and --image-uri of a finished run in a local directory, which a dry run reads."""
    (tmp_path / "metrics.json").write_text(json.dumps(RUN_METRICS))
    return ["--job-dir", str(tmp_path), "--image-uri", IMAGE]


def test_a_version_of_the_parent_model_carries_its_aliases_and_the_runs_metrics_and_data_hash(capsys, local_job):
    requests = dry_run(
        capsys,
        "deploy",
        *WHERE,
        *local_job,
        "--parent-model",
        "100",
        "--version-aliases",
        "candidate,exp-7",
        "--endpoint",
        "987",
        "--traffic-percent",
        "10",
    )
    upload = parse(requests["uploadModel"], v1.UploadModelRequest)
    assert upload.parent_model == PARENT_MODEL
    assert list(upload.model.version_aliases) == ["candidate", "exp-7"]
    labels = dict(upload.model.labels)
    assert labels["data_hash"] == "3f2a9c0d1e4b5a6f" and labels["task"] == "classification"
    assert (labels["validation_macro_f1"], labels["test_accuracy"]) == ("0_8731", "0_8667")
    assert all(len(v) <= 63 and set(v) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-") for v in labels.values())


def test_a_dry_run_canary_takes_its_share_and_leaves_the_rest_to_the_serving_models(capsys):
    requests = dry_run(
        capsys, "deploy", *WHERE, *MODEL, "--parent-model", "100", "--endpoint", "987", "--traffic-percent", "10"
    )
    deploy = parse(requests["deployModel"], v1.DeployModelRequest)
    assert deploy.deployed_model.model.endswith("@VERSION_ID")
    assert dict(deploy.traffic_split) == {"0": 10, "DEPLOYED_MODELS_SERVING_NOW": 90}


def test_promote_adds_the_default_alias_to_the_new_version(capsys):
    requests = dry_run(
        capsys, "deploy", *WHERE, *MODEL, "--parent-model", "100", "--version-aliases", "candidate", "--promote"
    )
    assert parse(requests["uploadModel"], v1.UploadModelRequest).model.version_aliases == ["candidate", "default"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--traffic-percent", "10"], "--traffic-percent: a canary shares the traffic of an endpoint"),
        (
            ["--endpoint", "987", "--traffic-percent", "100"],
            "--traffic-percent: expected a canary's share from 1 to 99",
        ),
        (["--endpoint", "987", "--traffic-percent", "10", "--promote"], "give one of them"),
        (["--version-aliases", "Candidate"], "--version-aliases: 'Candidate' is not a version alias"),
        (["--version-aliases", "7"], "--version-aliases: '7' is not a version alias"),
    ],
)
def test_deploy_flags_that_do_not_fit_together_are_one_error_line(capsys, flags, message):
    code, err = failure(capsys, "deploy", *WHERE, *MODEL, *flags, "--dry-run")
    assert code == 2 and err.startswith("error: ") and message in err and len(err.splitlines()) == 1


def test_a_dry_run_of_a_local_job_dir_uploads_its_model_dir(capsys, local_job):
    upload = parse(dry_run(capsys, "deploy", *WHERE, *local_job)["uploadModel"], v1.UploadModelRequest)
    assert upload.model.artifact_uri == f"{local_job[1]}/model" and upload.model.labels["test_macro_f1"] == "0_8500"


def test_a_dry_run_reads_nothing_from_cloud_storage_and_says_which_labels_it_leaves_out(capsys):
    assert cli.run(submission.main, ["deploy", *WHERE, *MODEL, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    labels = json.loads(out)["uploadModel"]["model"]["labels"]
    assert "data_hash" not in labels and "test_accuracy" not in labels
    assert (
        "note: a dry run reads nothing from Cloud Storage: the labels leave out the metrics and data hash in "
        "gs://my-bucket/runs/sentiment/metrics.json" in err
    )


def serving_endpoint(server):
    """Version 1 of PARENT_MODEL, deployed on ENDPOINT with all of its traffic."""
    server.put(PARENT_MODEL, {"displayName": "sentiment", "versionAliases": {"1": ["default"]}})
    server.put(
        ENDPOINT,
        {
            "displayName": "sentiment",
            "trafficSplit": {"111": 100},
            "deployedModels": [{"id": "111", "model": PARENT_MODEL + "@1", "modelVersionId": "1"}],
        },
    )


def deploy_against(server, *argv) -> int:
    with server.pointed_at("my-project", "us-central1"):
        return cli.run(deploy_command.main, [*WHERE, *argv])


def test_a_canary_uploads_a_version_and_deploys_it_with_ten_percent_beside_the_serving_one():
    with VertexLoopback() as server:
        serving_endpoint(server)
        code = deploy_against(
            server,
            *MODEL,
            "--parent-model",
            "100",
            "--version-aliases",
            "candidate",
            "--endpoint",
            "987",
            "--traffic-percent",
            "10",
        )
    assert code == 0
    [upload], [deploy] = server.find("POST", "/models:upload"), server.find("POST", ":deployModel")
    assert upload.body["parentModel"] == PARENT_MODEL and upload.body["model"]["versionAliases"] == ["candidate"]
    assert upload.body["model"]["labels"]["data_hash"] == RUN_METRICS["data_hash"]
    assert deploy.path == ENDPOINT + ":deployModel"
    assert deploy.body["deployedModel"]["model"] == PARENT_MODEL + "@2"  # the new version, not the default
    assert server.resources[ENDPOINT]["trafficSplit"] == {
        "111": 90,
        server.resources[ENDPOINT]["deployedModels"][-1]["id"]: 10,
    }
    assert deploy.body["trafficSplit"] == {"0": 10, "111": 90}


def test_promote_moves_all_traffic_to_the_deployed_version_and_the_default_alias_with_it():
    with VertexLoopback() as server:
        serving_endpoint(server)
        assert (
            deploy_against(server, *MODEL, "--parent-model", "100", "--endpoint", "987", "--traffic-percent", "10") == 0
        )
        canary = server.resources[ENDPOINT]["deployedModels"][-1]["id"]
        code = deploy_against(server, "--model", "100@2", "--endpoint", "987", "--promote")
    assert code == 0
    [update] = server.find("PATCH", ENDPOINT)
    assert update.query["updateMask"] == "trafficSplit"
    assert update.body["trafficSplit"] == {"111": 0, canary: 100}
    [aliases] = server.find("POST", ":mergeVersionAliases")
    assert aliases.path == PARENT_MODEL + "@2:mergeVersionAliases" and aliases.body["versionAliases"] == ["default"]
    assert server.resources[PARENT_MODEL]["versionAliases"] == {"1": [], "2": ["default"]}


def test_a_full_deploy_with_promote_sends_all_traffic_to_the_new_version_and_none_to_the_old():
    with VertexLoopback() as server:
        serving_endpoint(server)
        code = deploy_against(server, *MODEL, "--parent-model", "100", "--endpoint", "987", "--promote")
    [upload], [deploy] = server.find("POST", "/models:upload"), server.find("POST", ":deployModel")
    assert code == 0 and upload.body["model"]["versionAliases"] == ["default"]
    assert deploy.body["trafficSplit"] == {"0": 100, "111": 0}


def test_the_deploy_script_and_trainer_submit_deploy_send_the_same_requests(capsys):
    argv = [
        *WHERE,
        *MODEL,
        "--parent-model",
        "100",
        "--endpoint",
        "987",
        "--traffic-percent",
        "10",
        "--display-name",
        "sentiment",
    ]
    assert cli.run(deploy_command.main, [*argv, "--dry-run"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert dry_run(capsys, "deploy", *argv) == alone


def deploy_script(tmp_path, **settings) -> dict:
    """scripts/deploy.sh's dry run on a local job dir holding RUN_METRICS: the requests it prints."""
    from test_scripts import SERVE_IMAGE, run

    (tmp_path / "metrics.json").write_text(json.dumps(RUN_METRICS))
    result = run(
        "deploy.sh",
        DRY_RUN="1",
        PROJECT_ID="my-project",
        REGION="us-central1",
        JOB_DIR=str(tmp_path),
        IMAGE_URI=SERVE_IMAGE,
        IMAGE_LABELS="vertex-bert-trainer.variant=serve\n",
        **settings,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_deploy_script_passes_parent_model_aliases_and_traffic_percent_on(tmp_path):
    requests = deploy_script(
        tmp_path, PARENT_MODEL="100", VERSION_ALIASES="candidate", ENDPOINT="987", TRAFFIC_PERCENT="10"
    )
    upload = parse(requests["uploadModel"], v1.UploadModelRequest)
    assert (upload.parent_model, list(upload.model.version_aliases)) == (PARENT_MODEL, ["candidate"])
    assert parse(requests["deployModel"], v1.DeployModelRequest).traffic_split["0"] == 10


def test_the_deploy_script_promotes_with_promote_set(tmp_path):
    requests = deploy_script(tmp_path, PARENT_MODEL="100", ENDPOINT="987", PROMOTE="1")
    assert parse(requests["uploadModel"], v1.UploadModelRequest).model.version_aliases == ["default"]
    assert parse(requests["deployModel"], v1.DeployModelRequest).traffic_split["0"] == 100


@pytest.mark.parametrize(
    "serving, split",
    [
        ({"a": 60, "b": 40}, {"0": 10, "a": 54, "b": 36}),
        ({"a": 50, "b": 30, "c": 20}, {"0": 7, "a": 46, "b": 28, "c": 19}),  # 46.5, 27.9, 18.6: largest remainders
    ],
)
def test_a_canary_leaves_the_serving_models_their_proportions_of_the_rest(serving, split):
    from trainer.cloud import model_registry

    assert model_registry.canary_split(serving, split["0"]) == split and sum(split.values()) == 100


def test_promoting_a_version_that_is_not_deployed_on_the_endpoint_is_one_error_line(capsys):
    with VertexLoopback() as server:
        serving_endpoint(server)
        code = deploy_against(server, "--model", "100@3", "--endpoint", "987", "--promote")
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --model: 100@3 is not deployed on ") and len(err.splitlines()) == 1
    assert not server.find("PATCH", ENDPOINT)
