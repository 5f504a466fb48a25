"""Vertex AI conventions, as pure functions of an environment mapping.

Vertex tells a training container where to write through environment variables
(https://cloud.google.com/vertex-ai/docs/training/code-requirements#environment-variables).
Everything here takes the mapping as an argument so that local runs, custom jobs, tuning trials
and multi-worker pools can all be tested without a cloud.
"""

import dataclasses
import json
from collections.abc import Mapping

from trainer.errors import UserError


@dataclasses.dataclass(frozen=True)
class VertexEnvironment:
    """What Vertex told this process; every field is None on a local run."""

    model_dir: str | None = None  # AIP_MODEL_DIR: where Vertex expects the exported model
    checkpoint_dir: str | None = None  # AIP_CHECKPOINT_DIR
    tensorboard_dir: str | None = None  # AIP_TENSORBOARD_LOG_DIR: per trial in tuning jobs
    training_data_uri: str | None = None  # AIP_TRAINING_DATA_URI (managed datasets)
    validation_data_uri: str | None = None
    test_data_uri: str | None = None
    job_id: str | None = None  # CLOUD_ML_JOB_ID
    trial_id: str | None = None  # CLOUD_ML_TRIAL_ID: set only inside a tuning trial
    cluster: dict | None = None  # TF_CONFIG (or CLUSTER_SPEC) parsed

    @property
    def on_vertex(self) -> bool:
        """Inside any Vertex job: it sets CLOUD_ML_JOB_ID always and AIP_MODEL_DIR with an output dir."""
        return self.job_id is not None or self.model_dir is not None


def read_environment(environ: Mapping[str, str]) -> VertexEnvironment:
    """Empty variables count as unset: a blank `-e AIP_MODEL_DIR=` must not become a directory."""

    def get(name):
        value = environ.get(name, "").strip()
        return value or None

    return VertexEnvironment(
        model_dir=get("AIP_MODEL_DIR"),
        checkpoint_dir=get("AIP_CHECKPOINT_DIR"),
        tensorboard_dir=get("AIP_TENSORBOARD_LOG_DIR"),
        training_data_uri=get("AIP_TRAINING_DATA_URI"),
        validation_data_uri=get("AIP_VALIDATION_DATA_URI"),
        test_data_uri=get("AIP_TEST_DATA_URI"),
        job_id=get("CLOUD_ML_JOB_ID"),
        trial_id=get("CLOUD_ML_TRIAL_ID"),
        cluster=parse_cluster(environ),
    )


def parse_cluster(environ: Mapping[str, str]) -> dict | None:
    """TF_CONFIG, or Vertex's CLUSTER_SPEC rewritten into TF_CONFIG's shape.

    Vertex sets CLUSTER_SPEC on every replica and, for TensorFlow, TF_CONFIG as well
    (https://cloud.google.com/vertex-ai/docs/training/distributed-training). TF_CONFIG wins
    because tf.distribute reads it; CLUSTER_SPEC names pools by position ("workerpool0") and is
    translated so that the rest of the trainer sees one shape.
    """
    raw = environ.get("TF_CONFIG", "").strip()
    if raw:
        return _load_json("TF_CONFIG", raw)
    raw = environ.get("CLUSTER_SPEC", "").strip()
    if raw:
        spec = _load_json("CLUSTER_SPEC", raw)
        cluster = {_POOL_ROLES.get(name, name): tasks for name, tasks in spec.get("cluster", {}).items()}
        task = dict(spec.get("task", {}))
        task["type"] = _POOL_ROLES.get(task.get("type"), task.get("type"))
        return {"cluster": cluster, "task": {"type": task["type"], "index": int(task.get("index", 0))}}
    return None


def _load_json(name: str, raw: str) -> dict:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise UserError(f"${name} is not valid JSON ({e.msg} at character {e.pos}): {raw[:80]!r}") from None
    if not isinstance(value, dict):
        raise UserError(f"${name} must be a JSON object, got {raw[:80]!r}")
    return value


# Vertex names worker pools by position; TensorFlow names them by role.
_POOL_ROLES = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps", "workerpool3": "evaluator"}


def cluster_size(cluster: dict | None) -> int:
    """Tasks that each train a replica: parameter servers and the evaluator hold none."""
    if not cluster:
        return 1
    return sum(
        len(tasks) for name, tasks in cluster.get("cluster", {}).items() if name in ("chief", "master", "worker")
    )


def task_role(cluster: dict | None) -> tuple:
    """(task type, index, is_chief) of this process; a lone process is the chief."""
    if not cluster or cluster_size(cluster) <= 1:
        return "chief", 0, True
    task = cluster.get("task", {})
    task_type, index = task.get("type", "worker"), int(task.get("index", 0))
    has_chief = any(name in cluster.get("cluster", {}) for name in ("chief", "master"))
    is_chief = task_type in ("chief", "master") or (not has_chief and task_type == "worker" and index == 0)
    return task_type, index, is_chief


@dataclasses.dataclass(frozen=True)
class ServingEnvironment:
    """What Vertex tells a prediction container (custom-container requirements,
    https://cloud.google.com/vertex-ai/docs/predictions/custom-container-requirements); the
    defaults are the contract's own, so a local run behaves like one on Vertex."""

    port: int = 8080  # AIP_HTTP_PORT
    health_route: str = "/health"  # AIP_HEALTH_ROUTE
    predict_route: str = "/predict"  # AIP_PREDICT_ROUTE
    storage_uri: str | None = None  # AIP_STORAGE_URI: a gs:// copy of the model's artifacts
    # Where the server listens by default: this machine only, unless AIP_HTTP_PORT says it runs in
    # Vertex's container, whose port is reached from outside it (all interfaces).
    host: str = "127.0.0.1"


def read_serving_environment(environ: Mapping[str, str]) -> ServingEnvironment:
    """Empty variables count as unset, as in read_environment."""

    def get(name, default=None):
        return environ.get(name, "").strip() or default

    defaults = ServingEnvironment()
    port = get("AIP_HTTP_PORT", str(defaults.port))
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"$AIP_HTTP_PORT: expected a port number (1-65535), got {port!r}")
    routes = {
        name: get(name, default)
        for name, default in (
            ("AIP_HEALTH_ROUTE", defaults.health_route),
            ("AIP_PREDICT_ROUTE", defaults.predict_route),
        )
    }
    for name, route in routes.items():
        if not route.startswith("/"):
            raise UserError(f"${name}: expected a path starting with '/', got {route!r}")
    return ServingEnvironment(
        port=int(port),
        health_route=routes["AIP_HEALTH_ROUTE"],
        predict_route=routes["AIP_PREDICT_ROUTE"],
        storage_uri=get("AIP_STORAGE_URI"),
        host="0.0.0.0" if get("AIP_HTTP_PORT") else defaults.host,
    )
