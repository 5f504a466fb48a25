"""The tuning objective reaches Vertex through cloudml-hypertune's metrics file, and only there."""

import json

import numpy as np
import pytest
import tf_keras

from trainer import task_registry
from trainer.cloud import submission
from trainer.vertex import hypertune as reporting


class RecordingReporter:
    def __init__(self):
        self.calls = []

    def report_hyperparameter_tuning_metric(self, **kwargs):
        self.calls.append(kwargs)


class InjectValidationF1(tf_keras.callbacks.Callback):
    """Stands in for the trainer's epoch evaluation: writes val_macro_f1 into the epoch logs."""

    def __init__(self):
        super().__init__()
        self.values = []

    def on_epoch_end(self, epoch, logs=None):
        logs["val_macro_f1"] = 0.5 + 0.1 * epoch + 0.01 * float(logs["val_accuracy"])
        self.values.append(logs["val_macro_f1"])


def tiny_fit(callbacks, epochs=3):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 4)).astype("float32"), rng.integers(0, 3, size=64)
    model = tf_keras.Sequential([tf_keras.layers.Dense(3, activation="softmax", input_shape=(4,))])
    model.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, validation_data=(x[:16], y[:16]), epochs=epochs, batch_size=16, verbose=0, callbacks=callbacks)


@pytest.fixture
def no_vertex(monkeypatch):
    for name in ("CLOUD_ML_TRIAL_ID", "CLOUD_ML_HP_METRIC_FILE", "CLOUD_ML_JOB_ID"):
        monkeypatch.delenv(name, raising=False)


def test_reporting_is_enabled_in_a_trial_or_with_an_explicit_metrics_file():
    assert not reporting.reporting_enabled({})
    assert not reporting.reporting_enabled({"CLOUD_ML_JOB_ID": "1", "CLOUD_ML_TRIAL_ID": " "})
    assert reporting.reporting_enabled({"CLOUD_ML_TRIAL_ID": "3"})
    assert reporting.reporting_enabled({"CLOUD_ML_HP_METRIC_FILE": "/tmp/m"})


def test_a_real_training_run_writes_one_json_line_per_epoch_and_one_final(tmp_path, monkeypatch):
    metrics_file = tmp_path / "hypertune" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(metrics_file))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "7")
    inject, reporter = InjectValidationF1(), reporting.HypertuneReporter(task_registry.default_metric())
    assert reporter.active
    tiny_fit([inject, reporter])
    reporter.report_final(max(inject.values), step=3)

    lines = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    assert [line["global_step"] for line in lines] == ["1", "2", "3", "3"]
    assert [float(line["val_macro_f1"]) for line in lines] == pytest.approx(inject.values + [max(inject.values)])
    for line in lines:
        assert set(line) == {"timestamp", "trial", "val_macro_f1", "global_step", "checkpoint_path"}
        assert line["trial"] == "7"
    # The tag is the metric the tuning job optimizes, with the goal the job declares.
    assert submission.metric_spec(reporter.metric) == {"val_macro_f1": "maximize"}


def test_outside_vertex_nothing_is_created_or_reported(no_vertex, monkeypatch):
    def forbidden():
        raise AssertionError("HyperTune() creates /tmp/hypertune; it must not run locally")

    monkeypatch.setattr(reporting.hypertune, "HyperTune", forbidden)
    reporter = reporting.HypertuneReporter("val_macro_f1")
    assert not reporter.active
    reporter.on_epoch_end(0, {"val_macro_f1": 0.5})
    reporter.report_final(0.5, step=1)


def test_a_trial_id_alone_reports_to_vertexs_default_file(no_vertex, monkeypatch):
    made = []

    def fake_hypertune():
        made.append(RecordingReporter())
        return made[-1]

    monkeypatch.setattr(reporting.hypertune, "HyperTune", fake_hypertune)
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "2")
    reporter = reporting.HypertuneReporter("val_loss")
    reporter.on_epoch_end(4, {"val_loss": np.float32(0.25)})
    assert made[0].calls == [{"hyperparameter_metric_tag": "val_loss", "metric_value": 0.25, "global_step": 5}]


def test_a_given_reporter_gets_the_tag_value_and_epoch_as_step(no_vertex):
    recorder = RecordingReporter()
    reporter = reporting.HypertuneReporter("val_accuracy", reporter=recorder)
    reporter.on_epoch_end(0, {"val_accuracy": 0.75, "val_loss": 1.0})
    reporter.report_final(0.8, step=2)
    assert recorder.calls == [
        {"hyperparameter_metric_tag": "val_accuracy", "metric_value": 0.75, "global_step": 1},
        {"hyperparameter_metric_tag": "val_accuracy", "metric_value": 0.8, "global_step": 2},
    ]


def test_a_missing_objective_fails_loudly_rather_than_leaving_a_trial_unmeasured(no_vertex):
    reporter = reporting.HypertuneReporter("val_macro_f1", reporter=RecordingReporter())
    with pytest.raises(ValueError, match="val_macro_f1.*after the callback"):
        reporter.on_epoch_end(0, {"loss": 1.0, "accuracy": 0.5})


def test_an_unknown_metric_is_rejected():
    with pytest.raises(ValueError, match="val_unknown"):
        reporting.HypertuneReporter("val_unknown")
