"""`python -m trainer.deploy` (also `trainer.submit deploy`) and `trainer.submit batch-predict`:
a finished job's model, registered and served by Vertex AI.

A model exported with our TF-Text needs our serving image (Dockerfile.serve, `python -m
trainer.serve`): Vertex's prebuilt TensorFlow prediction containers cannot load its ops. Both
commands build the Vertex AI v1 API's own request messages (google.cloud.aiplatform_v1):
UploadModelRequest (what the SDK's `Model.upload` sends: the job's model/ as artifact, the image,
its routes, port and health check; with `parent_model` and `version_aliases` a new version of a
registered model, labelled with the run's metrics and data hash), CreateEndpointRequest and
DeployModelRequest (`Endpoint.deploy`: machine type, min/max replicas, `traffic_split`),
UpdateEndpointRequest and MergeVersionAliasesRequest (promoting a deployed version),
CreateBatchPredictionJobRequest (JSONL or CSV in gs:// to gs://). --dry-run prints those
requests as REST JSON; a real run sends the very same messages, through clients made by the
SDK's global config (so `aiplatform.init(api_endpoint=...)` points them elsewhere, as tests do).

Canary and promotion follow Vertex's traffic model: a DeployModelRequest's traffic_split names
the new deployment "0" and replaces the endpoint's split, so `--traffic-percent N` gives it N and
scales the deployments serving now to share 100-N; `--promote` gives it 100 and the others 0.
"""

import argparse
import datetime
import json
import sys

from trainer import cli
from trainer.cloud import model_registry
from trainer.errors import UserError
from trainer.serving import variants
from trainer.vertex import api
from trainer.vertex import environment as vertex

COMMANDS = ("deploy", "batch-predict")
# 4 vCPUs, 15 GB: room for a 6-layer encoder's graph and two concurrent batches (docs/vertex.md
# has its hourly price).
DEFAULT_MACHINE_TYPE = "n1-standard-4"
# trainer.serve's defaults, declared in the model so that Vertex checks and routes to them (it
# passes them to the container as AIP_HTTP_PORT, AIP_HEALTH_ROUTE and AIP_PREDICT_ROUTE).
SERVING = vertex.ServingEnvironment()
INSTANCE_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv"}
# The names scripts/build-image.sh gives the training images, by which scripts/deploy.sh refuses
# them when skopeo cannot read the image's label (scripts/lib.sh: require_image, image_variant).
TRAINING_IMAGES = {
    "vertex-bert-trainer": "the GPU image (scripts/build-image.sh)",
    "vertex-bert-trainer-tpu": "the TPU image (VARIANT=tpu scripts/build-image.sh)",
}


def _parents() -> list:
    """The flags deploy and batch-predict share: where, and which model."""
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--project", required=True, help="Google Cloud project id.")
    where.add_argument("--region", required=True, help="Vertex AI region, e.g. us-central1.")
    where.add_argument("--display-name", help="Name in the console (default: vbt-COMMAND-TIMESTAMP).")
    where.add_argument("--machine-type", default=DEFAULT_MACHINE_TYPE, help="Machine type of each replica.")
    where.add_argument("--service-account", help="Service account the serving containers run as.")
    where.add_argument(
        "--dry-run", action="store_true", help="Print the requests as JSON and send nothing (needs no credentials)."
    )
    model = argparse.ArgumentParser(add_help=False)
    model.add_argument(
        "--job-dir",
        help="The finished training job's gs:// directory; its model/ is served (a --dry-run also takes a local one).",
    )
    model.add_argument(
        "--image-uri",
        help="Serving image (Dockerfile.serve; scripts/build-image.sh VARIANT=serve), "
        "or the one without TensorFlow, which serves the model's ONNX "
        "copies (Dockerfile.serve-onnx; VARIANT=serve-onnx).",
    )
    model.add_argument(
        "--precision",
        default="auto",
        choices=variants.PRECISIONS,
        help=f"trainer.serve's --precision in the uploaded model's container. {variants.AUTO_HELP}",
    )
    return [where, model]


def add_deploy_arguments(deploy) -> None:
    deploy.add_argument(
        "--endpoint", help="Deploy to this existing endpoint (ID or resource name) instead of creating one."
    )
    deploy.add_argument("--min-replicas", type=int, default=1, help="Replicas always running (billed hourly).")
    deploy.add_argument("--max-replicas", type=int, default=1, help="Upper bound for autoscaling.")
    deploy.add_argument(
        "--parent-model",
        help="Register the job's model as a new version of this model (ID or resource name) instead of as a new model.",
    )
    deploy.add_argument("--version-aliases", help="Comma-separated aliases of the new version, e.g. candidate.")
    deploy.add_argument(
        "--traffic-percent",
        type=int,
        metavar="N",
        help="Canary: deploy beside the models --endpoint serves, with N%% of its traffic "
        "(1-99); they keep the rest, in their current proportions.",
    )
    deploy.add_argument(
        "--promote",
        action="store_true",
        help="All traffic and the `default` alias to the new version. With --model "
        "MODEL@VERSION and no --job-dir: promote that version, deployed on "
        "--endpoint already (e.g. a canary).",
    )
    deploy.add_argument(
        "--model", help="With --promote: the registered version to promote (MODEL@VERSION, an ID or resource name)."
    )


def build_parser(prog: str = "python -m trainer.deploy") -> argparse.ArgumentParser:
    """trainer.deploy's own parser: the flags of `trainer.submit deploy`."""
    parser = cli.ArgumentParser(
        prog=prog,
        parents=_parents(),
        allow_abbrev=False,
        description="Register a finished job's model with Vertex AI (a new model, or a version of "
        "--parent-model) and deploy it to an endpoint: all of its traffic, or a canary's "
        "share (--traffic-percent); or promote a deployed version (--promote).",
    )
    add_deploy_arguments(parser)
    parser.set_defaults(command="deploy")
    return parser


def add_parsers(commands) -> None:
    """The two subcommands, on trainer.submit's subparsers."""
    parents = _parents()
    deploy = commands.add_parser(
        "deploy",
        parents=parents,
        allow_abbrev=False,
        help="Upload the job's model and deploy it to an online endpoint (as `python -m trainer.deploy`).",
    )
    add_deploy_arguments(deploy)

    batch = commands.add_parser(
        "batch-predict",
        parents=parents,
        allow_abbrev=False,
        help="A batch prediction job over JSON Lines or CSV files in Cloud Storage.",
    )
    batch.add_argument(
        "--model",
        help="An uploaded model (ID or resource name; `deploy` prints it). "
        "Or give --job-dir and --image-uri to upload one first.",
    )
    batch.add_argument(
        "--input",
        nargs="+",
        required=True,
        metavar="GS_URI",
        help="gs:// JSON Lines (.jsonl) or CSV (.csv) files; wildcards allowed.",
    )
    batch.add_argument("--output", required=True, help="gs:// prefix the predictions (JSON Lines) go under.")
    batch.add_argument("--text-field", default="text", help="The JSON field or CSV column holding the text.")
    batch.add_argument("--replicas", type=int, default=1, help="Machines the job starts with.")
    batch.add_argument("--max-replicas", type=int, default=1, help="Most machines the job may scale to.")


def check_serving_image(options) -> None:
    """Refuses a training image as the model's container, as scripts/deploy.sh does: its
    ENTRYPOINT is trainer.task, not trainer.serve, so Vertex would start it on a billed machine,
    where it serves nothing, and fail the deployment minutes later."""
    image = options.image_uri or ""
    name = image.rsplit("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    if name in TRAINING_IMAGES:
        raise UserError(
            f"--image-uri {image} is {TRAINING_IMAGES[name]}, by its name {name}; "
            f"{options.command} needs the serving image (VARIANT=serve "
            f"scripts/build-image.sh)"
        )


def check_replicas(options) -> None:
    low_flag, low = (
        ("--min-replicas", options.min_replicas) if options.command == "deploy" else ("--replicas", options.replicas)
    )
    if not 1 <= low <= options.max_replicas:
        raise UserError(
            f"{low_flag}/--max-replicas: need 1 <= {low_flag} <= --max-replicas, got {low} and {options.max_replicas}"
        )


def gcs_uri(flag: str, value: str | None) -> str:
    if not value or not value.startswith("gs://") or len(value.rstrip("/")) <= len("gs://"):
        raise UserError(f"{flag}: expected a Cloud Storage path gs://BUCKET/..., got {value!r}")
    return value.rstrip("/")


def check_resource_id(flag: str, value: str | None) -> None:
    """Vertex AI's model and endpoint IDs are digits (or lower-case names): an upper-case one is
    the docs' placeholder (`--model MODEL_ID`) copied literally, refused before any request."""
    if value and any(c.isupper() for c in value.rstrip("/").rsplit("/", 1)[-1]):
        raise UserError(
            f"{flag}: {value!r} is a placeholder, not an ID: give the number that "
            f"`trainer.submit deploy` printed (uploaded model .../models/ID, endpoint "
            f".../endpoints/ID) or the full resource name"
        )


def resource_name(parent: str, collection: str, value: str) -> str:
    """An ID or a full resource name (projects/P/locations/R/COLLECTION/ID) -> the full name."""
    return value if value.startswith("projects/") else f"{parent}/{collection}/{value}"


def job_dir(options) -> str:
    """--job-dir: on gs://, where Vertex reads the model from; a dry run takes a local one too
    (trainer.pipeline's local run prints its register step)."""
    if options.dry_run and options.job_dir and "://" not in options.job_dir:
        return options.job_dir.rstrip("/")
    return gcs_uri("--job-dir", options.job_dir)


def read_run_metrics(options) -> dict | None:
    """The job's metrics.json, which a finished run writes last: a real upload refuses a job
    without it. A dry run reads a local job dir's only: it reaches no cloud (and needs no
    credentials), so for a gs:// job dir it says which labels it leaves out."""
    from trainer import storage

    path = storage.join(job_dir(options), "metrics.json")
    if options.dry_run and "://" in path:
        print(
            f"note: a dry run reads nothing from Cloud Storage: the labels leave out the metrics and "
            f"data hash in {path}",
            file=sys.stderr,
        )
        return None
    try:
        if "://" in path:
            return json.loads(storage.read_bytes(path))
        with storage.open_binary(path) as f:  # a local file, read without starting TensorFlow
            return json.loads(f.read())
    except (UserError, OSError, ValueError) as error:
        reason = str(error) if isinstance(error, UserError) else f"{path}: {error}"
        raise UserError(
            f"--job-dir: cannot read the run's metrics.json ({reason}): only a finished run is registered"
        ) from None


def upload_request(parent: str, options, display_name: str, labels: dict):
    from google.cloud import aiplatform_v1 as v1

    if not options.job_dir or not options.image_uri:
        raise UserError("--job-dir and --image-uri: both needed to upload the job's model")
    aliases = model_registry.version_aliases(
        getattr(options, "version_aliases", None), getattr(options, "promote", False)
    )
    metrics = read_run_metrics(options) if options.command == "deploy" else None
    # args follow the image's ENTRYPOINT (python -m trainer.serve): its flags.
    container = v1.ModelContainerSpec(
        image_uri=options.image_uri,
        args=["--precision", options.precision],
        ports=[v1.Port(container_port=SERVING.port)],
        predict_route=SERVING.predict_route,
        health_route=SERVING.health_route,
    )
    model = v1.Model(
        display_name=display_name,
        artifact_uri=job_dir(options) + "/model",
        container_spec=container,
        labels={**labels, **model_registry.run_labels(metrics or {})},
        version_aliases=aliases,
    )
    parent_model = getattr(options, "parent_model", None)
    return v1.UploadModelRequest(
        parent=parent,
        model=model,
        service_account=options.service_account or "",
        parent_model=resource_name(parent, "models", parent_model) if parent_model else "",
    )


def deploy_request(endpoint: str, model: str, options, display_name: str, split: dict):
    from google.cloud import aiplatform_v1 as v1

    resources = v1.DedicatedResources(
        machine_spec=v1.MachineSpec(machine_type=options.machine_type),
        min_replica_count=options.min_replicas,
        max_replica_count=options.max_replicas,
    )
    deployed = v1.DeployedModel(
        model=model,
        display_name=display_name,
        dedicated_resources=resources,
        service_account=options.service_account or "",
    )
    return v1.DeployModelRequest(endpoint=endpoint, deployed_model=deployed, traffic_split=split)


def batch_prediction_request(parent: str, model: str, options, display_name: str, labels: dict):
    """Each line or row reaches the server as a one-element array [text] (instance_config), the
    form trainer.serve accepts from both formats, whatever the field is called."""
    from google.cloud import aiplatform_v1 as v1

    inputs = [gcs_uri("--input", uri) for uri in options.input]
    formats = {INSTANCE_FORMATS.get("." + uri.rsplit(".", 1)[-1].lower()) for uri in inputs}
    if None in formats or len(formats) != 1:
        raise UserError(f"--input: expected .jsonl or .csv files, all of one kind, got {' '.join(inputs)}")
    instances_format = formats.pop()
    job = v1.BatchPredictionJob(
        display_name=display_name,
        model=model,
        labels=labels,
        service_account=options.service_account or "",
        input_config=v1.BatchPredictionJob.InputConfig(
            instances_format=instances_format, gcs_source=v1.GcsSource(uris=inputs)
        ),
        # instance_type applies to JSON Lines only; CSV rows are arrays already.
        instance_config=v1.BatchPredictionJob.InstanceConfig(
            instance_type="array" if instances_format == "jsonl" else "", included_fields=[options.text_field]
        ),
        output_config=v1.BatchPredictionJob.OutputConfig(
            predictions_format="jsonl",
            gcs_destination=v1.GcsDestination(output_uri_prefix=gcs_uri("--output", options.output)),
        ),
        dedicated_resources=v1.BatchDedicatedResources(
            machine_spec=v1.MachineSpec(machine_type=options.machine_type),
            starting_replica_count=options.replicas,
            max_replica_count=options.max_replicas,
        ),
    )
    return v1.CreateBatchPredictionJobRequest(parent=parent, batch_prediction_job=job)


def as_json(request) -> dict:
    from google.protobuf import json_format

    return json_format.MessageToDict(type(request).pb(request))


class Clients:
    """The v1 API's regional service clients, made by the SDK's global config (its endpoint,
    transport and credentials: Application Default Credentials unless `aiplatform.init` was
    given others); building them finds the credentials."""

    def __init__(self, region: str):
        from google.cloud import aiplatform_v1 as v1
        from google.cloud.aiplatform import initializer

        def client(service):
            return initializer.global_config.create_client(client_class=service, location_override=region)

        self.model = client(v1.ModelServiceClient)
        self.endpoint = client(v1.EndpointServiceClient)
        self.job = client(v1.JobServiceClient)


def check_region(region: str) -> None:
    from google.cloud.aiplatform import utils

    try:
        utils.validate_region(region)
    except ValueError:
        raise UserError(f"--region: {region!r} is not a Vertex AI region (e.g. us-central1, europe-west4)") from None


def check_deploy(options) -> None:
    """The deploy flags that only make sense together, refused before anything is read or sent."""
    if options.traffic_percent is not None:
        if not 1 <= options.traffic_percent <= 99:
            raise UserError(
                f"--traffic-percent: expected a canary's share from 1 to 99 (--promote sends "
                f"all traffic), got {options.traffic_percent}"
            )
        if options.promote:
            raise UserError("--traffic-percent: a canary takes a share, --promote all of the traffic; give one of them")
        if not options.endpoint:
            raise UserError(
                "--traffic-percent: a canary shares the traffic of an endpoint serving a model "
                "already: give its --endpoint"
            )
    if options.model and not (options.promote and options.endpoint and not options.job_dir):
        raise UserError(
            "--model: promotes a version deployed already: give it with --promote and --endpoint, without --job-dir"
        )
    if options.promote and not options.job_dir and not options.model:
        raise UserError(
            "--promote: give --job-dir (upload and deploy with all traffic) or --model "
            "MODEL@VERSION with --endpoint (promote a deployed version)"
        )


def traffic(options, serving: dict | None) -> dict:
    """The DeployModelRequest's traffic_split: `serving` is the endpoint's split now (None on a
    new endpoint, or in a dry run that cannot read it)."""
    if options.traffic_percent is not None:
        return model_registry.canary_split(serving or {model_registry.SERVING_NOW: 100}, options.traffic_percent)
    if options.endpoint:  # a promotion or a plain deploy to an existing endpoint: all traffic
        return model_registry.promoted_split(serving if serving is not None else {model_registry.SERVING_NOW: 0})
    return model_registry.promoted_split({})


def run_deploy(options, parent: str, display_name: str, labels: dict) -> int:
    from google.cloud import aiplatform_v1 as v1

    check_deploy(options)
    if options.model:
        return run_promote(options, parent)
    upload = upload_request(parent, options, display_name, labels)
    create = (
        None
        if options.endpoint
        else v1.CreateEndpointRequest(parent=parent, endpoint=v1.Endpoint(display_name=display_name, labels=labels))
    )
    if options.dry_run:
        endpoint = resource_name(parent, "endpoints", options.endpoint or "ENDPOINT_ID_FROM_CREATE_ENDPOINT")
        deploy = deploy_request(
            endpoint,
            f"{parent}/models/MODEL_ID_FROM_UPLOAD_MODEL@VERSION_ID",
            options,
            display_name,
            traffic(options, None),
        )
        return print_requests({"uploadModel": upload, "createEndpoint": create, "deployModel": deploy})
    clients = Clients(options.region)
    uploaded = clients.model.upload_model(request=upload).result()
    # The version just uploaded: a bare parent model's name would deploy its default version.
    model = f"{uploaded.model}@{uploaded.model_version_id}"
    print(f"uploaded model {model}", flush=True)
    if options.endpoint:
        endpoint = resource_name(parent, "endpoints", options.endpoint)
        serving = dict(clients.endpoint.get_endpoint(name=endpoint).traffic_split)
    else:
        endpoint, serving = clients.endpoint.create_endpoint(request=create).result().name, None
    split = traffic(options, serving)
    print(
        f'deploying to endpoint {endpoint} with traffic {split} ("0" is the new version; this takes 10-20 minutes) ...',
        flush=True,
    )
    clients.endpoint.deploy_model(request=deploy_request(endpoint, model, options, display_name, split)).result()
    print(
        f"deployed. Predict with: gcloud ai endpoints predict {endpoint.rsplit('/', 1)[-1]} "
        f"--region={options.region} --json-request=REQUEST.json"
    )
    return 0


def promote_requests(parent: str, options, endpoint) -> tuple:
    """(UpdateEndpointRequest, MergeVersionAliasesRequest) moving all of `endpoint`'s traffic and
    the `default` alias to --model's version, deployed there already."""
    from google.cloud import aiplatform_v1 as v1
    from google.protobuf import field_mask_pb2

    name, _, version = resource_name(parent, "models", options.model).partition("@")
    if not version:
        raise UserError(f"--model: name the version to promote, MODEL@VERSION (e.g. {options.model}@2)")
    deployed = [
        d.id
        for d in endpoint.deployed_models
        if d.model.partition("@")[0] == name and version in (d.model_version_id, d.model.partition("@")[2])
    ]
    if not deployed:
        raise UserError(
            f"--model: {options.model} is not deployed on {endpoint.name}; deploy it first "
            f"(--traffic-percent for a canary)"
        )
    endpoint.traffic_split.clear()
    endpoint.traffic_split.update(
        model_registry.promoted_split({d.id: 0 for d in endpoint.deployed_models}, deployed[0])
    )
    update = v1.UpdateEndpointRequest(endpoint=endpoint, update_mask=field_mask_pb2.FieldMask(paths=["traffic_split"]))
    return update, v1.MergeVersionAliasesRequest(
        name=f"{name}@{version}", version_aliases=[model_registry.DEFAULT_ALIAS]
    )


def run_promote(options, parent: str) -> int:
    from google.cloud import aiplatform_v1 as v1

    name = resource_name(parent, "endpoints", options.endpoint)
    if options.dry_run:
        stand_in = v1.Endpoint(
            name=name,
            deployed_models=[
                v1.DeployedModel(
                    id="DEPLOYED_MODEL_ID_OF_THE_VERSION", model=resource_name(parent, "models", options.model)
                ),
                v1.DeployedModel(id=model_registry.SERVING_NOW, model="THE_OTHER_DEPLOYED_MODELS"),
            ],
        )
        update, aliases = promote_requests(parent, options, stand_in)
        return print_requests({"updateEndpoint": update, "mergeVersionAliases": aliases})
    clients = Clients(options.region)
    update, aliases = promote_requests(parent, options, clients.endpoint.get_endpoint(name=name))
    clients.endpoint.update_endpoint(request=update)
    clients.model.merge_version_aliases(request=aliases)
    print(f"promoted {aliases.name}: all of {name}'s traffic and the default alias")
    return 0


def run_batch_predict(options, parent: str, display_name: str, labels: dict) -> int:
    upload = None if options.model else upload_request(parent, options, display_name, labels)
    model = resource_name(parent, "models", options.model or "MODEL_ID_FROM_UPLOAD_MODEL")
    job = batch_prediction_request(parent, model, options, display_name, labels)
    if options.dry_run:
        return print_requests({"uploadModel": upload, "createBatchPredictionJob": job})
    clients = Clients(options.region)
    if upload is not None:
        job.batch_prediction_job.model = clients.model.upload_model(request=upload).result().model
        print(f"uploaded model {job.batch_prediction_job.model}", flush=True)
    created = clients.job.create_batch_prediction_job(request=job)
    print(f"created batch prediction job {created.name}; predictions go under {options.output}")
    return 0


def print_requests(requests: dict) -> int:
    print("Dry run: these requests would be sent to Vertex AI; nothing was sent.", file=sys.stderr)
    print(json.dumps({name: as_json(r) for name, r in requests.items() if r is not None}, indent=2))
    return 0


def main(options, extra_args) -> int:
    if extra_args:
        raise UserError(f"{options.command} takes no trainer arguments after `--`, got {' '.join(extra_args)}")
    if options.command == "batch-predict" and options.model and (options.job_dir or options.image_uri):
        raise UserError("--model: give either an uploaded --model or --job-dir with --image-uri, not both")
    check_serving_image(options)
    check_replicas(options)
    check_resource_id("--model", getattr(options, "model", None))
    check_resource_id("--endpoint", getattr(options, "endpoint", None))
    parent = f"projects/{options.project}/locations/{options.region}"
    display_name = options.display_name or f"vbt-{options.command}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    labels = {"app": "vertex-bert-trainer", "command": options.command}
    with api.google_errors():
        check_region(options.region)
        run = run_deploy if options.command == "deploy" else run_batch_predict
        return run(options, parent, display_name, labels)
