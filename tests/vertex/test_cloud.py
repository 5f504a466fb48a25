"""Where a run writes and which role it plays: locally, in a Vertex custom job, in a tuning trial
and in a multi-worker job, from the environment Vertex sets (trainer.vertex.environment, trainer.config)."""

import datetime
import json

import pytest

from trainer import config
from trainer.errors import UserError
from trainer.vertex import environment as vertex

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5)
BASE = "gs://bucket/vertex-bert-trainer/job-1"


def custom_job_env(base=BASE, **extra):
    """What Vertex sets when CustomJobSpec.base_output_directory is `base`: trailing slashes included."""
    return {
        "CLOUD_ML_JOB_ID": "4711",
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
        **extra,
    }


def trial_env(trial, base=BASE):
    """A tuning trial: the job's base output directory gets a subdirectory per trial id."""
    return custom_job_env(f"{base}/{trial}", CLOUD_ML_TRIAL_ID=str(trial))


def cluster_env(task_type, index, workers=2):
    """TF_CONFIG of a job with one chief pool replica and `workers` worker replicas."""
    tf_config = {
        "cluster": {
            "chief": ["cmle-training-workerpool0-0:2222"],
            "worker": [f"cmle-training-workerpool1-{i}:2222" for i in range(workers)],
        },
        "task": {"type": task_type, "index": index},
        "environment": "cloud",
    }
    return custom_job_env(TF_CONFIG=json.dumps(tf_config))


def outputs(argv, environ):
    out = config.build_config(argv, environ, now=NOW).output
    return out.job_dir, out.model_dir, out.checkpoint_dir, out.tensorboard_dir


def test_a_local_run_writes_everything_under_a_timestamped_job_dir():
    env = vertex.read_environment({})
    assert env == vertex.VertexEnvironment() and not env.on_vertex
    assert outputs([], {}) == (
        "runs/run-20260102-030405",
        "runs/run-20260102-030405/model",
        "runs/run-20260102-030405/checkpoints",
        "runs/run-20260102-030405/tensorboard",
    )
    assert outputs(["--job-dir", "out"], {}) == ("out", "out/model", "out/checkpoints", "out/tensorboard")
    assert vertex.task_role(env.cluster) == ("chief", 0, True)


def test_a_custom_job_writes_where_vertex_says():
    environ = custom_job_env()
    env = vertex.read_environment(environ)
    assert env.on_vertex and env.job_id == "4711" and env.trial_id is None
    assert outputs([], environ) == (BASE, f"{BASE}/model/", f"{BASE}/checkpoints/", f"{BASE}/logs/")


def test_flags_override_the_environment():
    argv = [
        "--model-dir",
        "gs://other/model",
        "--checkpoint-dir",
        "gs://other/ckpt",
        "--tensorboard-dir",
        "gs://other/tb",
    ]
    assert outputs(argv, custom_job_env()) == (BASE, "gs://other/model", "gs://other/ckpt", "gs://other/tb")


def test_managed_dataset_uris_feed_the_data_flags_unless_given():
    environ = custom_job_env(
        AIP_TRAINING_DATA_URI="gs://d/train-*.csv",
        AIP_VALIDATION_DATA_URI="gs://d/val-*.csv",
        AIP_TEST_DATA_URI="gs://d/test-*.csv",
    )
    data = config.build_config([], environ, now=NOW).data
    assert (data.training_file, data.validation_file, data.testing_file) == (
        "gs://d/train-*.csv",
        "gs://d/val-*.csv",
        "gs://d/test-*.csv",
    )
    assert config.build_config(["--training-file", "mine.csv"], environ, now=NOW).data.training_file == "mine.csv"


def test_each_tuning_trial_gets_its_own_directories():
    first, second = outputs([], trial_env(3)), outputs([], trial_env(4))
    assert first == (f"{BASE}/3", f"{BASE}/3/model/", f"{BASE}/3/checkpoints/", f"{BASE}/3/logs/")
    assert second[0] == f"{BASE}/4"
    assert vertex.read_environment(trial_env(3)).trial_id == "3"


def test_a_trial_without_vertex_output_dirs_nests_under_the_job_dir():
    environ = {"CLOUD_ML_JOB_ID": "4711", "CLOUD_ML_TRIAL_ID": "7"}
    assert outputs(["--job-dir", "gs://b/tuning"], environ)[:2] == (
        "gs://b/tuning/trial-7",
        "gs://b/tuning/trial-7/model",
    )


def test_trials_given_one_job_dir_still_write_apart():
    argv = ["--job-dir", "gs://b/tuning"]
    assert outputs(argv, trial_env(3))[0] != outputs(argv, trial_env(4))[0]


def test_vertex_arguments_the_trainer_does_not_know_are_tolerated_there_only():
    argv = ["--epochs", "2", "--some-vertex-flag=1"]
    assert config.build_config(argv, custom_job_env(), now=NOW).train.epochs == 2
    with pytest.raises(UserError, match="--some-vertex-flag"):
        config.build_config(argv, {}, now=NOW)


def test_every_replica_of_a_multi_worker_job_sees_the_same_outputs_and_its_own_role():
    roles = {}
    for task_type, index in (("chief", 0), ("worker", 0), ("worker", 1)):
        environ = cluster_env(task_type, index)
        env = vertex.read_environment(environ)
        assert vertex.cluster_size(env.cluster) == 3
        assert outputs([], environ) == outputs([], custom_job_env())
        roles[(task_type, index)] = vertex.task_role(env.cluster)
    assert roles == {
        ("chief", 0): ("chief", 0, True),
        ("worker", 0): ("worker", 0, False),
        ("worker", 1): ("worker", 1, False),
    }


def test_cluster_spec_is_read_like_tf_config_when_tf_config_is_absent():
    spec = {
        "cluster": {"workerpool0": ["w0-0:2222"], "workerpool1": ["w1-0:2222", "w1-1:2222"]},
        "environment": "cloud",
        "task": {"type": "workerpool1", "index": 1, "trial": "2"},
    }
    cluster = vertex.parse_cluster({"CLUSTER_SPEC": json.dumps(spec)})
    assert cluster == {
        "cluster": {"chief": ["w0-0:2222"], "worker": ["w1-0:2222", "w1-1:2222"]},
        "task": {"type": "worker", "index": 1},
    }
    assert vertex.task_role(cluster) == ("worker", 1, False)
    tf_config = json.dumps({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": 0}})
    assert vertex.parse_cluster({"CLUSTER_SPEC": json.dumps(spec), "TF_CONFIG": tf_config})["task"]["type"] == "chief"


def test_a_single_replica_job_is_its_own_chief():
    single = {"cluster": {"chief": ["c:2222"]}, "task": {"type": "chief", "index": 0}}
    assert vertex.cluster_size(single) == 1 and vertex.task_role(single) == ("chief", 0, True)


def test_only_training_tasks_count_and_a_chiefless_cluster_elects_worker_0():
    cluster = {
        "cluster": {"worker": ["a:1", "b:1"], "ps": ["p:1"], "evaluator": ["e:1"]},
        "task": {"type": "evaluator", "index": 0},
    }
    assert vertex.cluster_size(cluster) == 2
    assert vertex.task_role(cluster) == ("evaluator", 0, False)
    assert vertex.task_role({**cluster, "task": {"type": "worker", "index": 0}}) == ("worker", 0, True)


def test_blank_variables_count_as_unset():
    assert (
        vertex.read_environment({"AIP_MODEL_DIR": " ", "CLOUD_ML_TRIAL_ID": "", "TF_CONFIG": ""})
        == vertex.VertexEnvironment()
    )


@pytest.mark.parametrize("name", ["TF_CONFIG", "CLUSTER_SPEC"])
@pytest.mark.parametrize("raw", ["{not json", "[1, 2]"])
def test_a_malformed_cluster_variable_is_a_clear_error(name, raw):
    with pytest.raises(UserError, match=name):
        vertex.read_environment({name: raw})
