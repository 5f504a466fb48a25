"""What each task kind does with a teacher's outputs (issue #51, "The loss"): packed targets, the
distillation loss and training metric over them, the teacher file's checks, the teacher scored
as the student is, and the loss and metrics a run compiles with a teacher. Tiny fixtures, no encoder."""

import types

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from trainer.data.labels import LabelSpec
from trainer.tasks import ClassificationTask, MultiLabelTask, RegressionTask

T, ALPHA = 2.0, 0.3
# Classification: three rows of three classes; the third has no label.
LOGITS = np.array([[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.0, 3.0]], np.float32)
TEACHER = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])
CLASSES = np.array([0, 2], np.int32)  # the labelled rows' classes


def log_softmax(z):
    z = np.asarray(z, np.float64)
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def hand_kl(teacher, logits, t):
    """KL(softmax(log p / t) || softmax(z / t)) per row."""
    p_log, q_log = log_softmax(np.log(teacher) / t), log_softmax(logits / t)
    return (np.exp(p_log) * (p_log - q_log)).sum(axis=1)


def classification_targets():
    task = ClassificationTask()
    return task, np.concatenate(
        [task.distillation.pack(CLASSES, TEACHER[:2]), task.distillation.pack(None, TEACHER[2:])]
    )


def per_row(loss, targets, outputs):
    """The loss of each row, as Keras gets it before reducing the batch."""
    return loss.call(tf.constant(targets), tf.constant(outputs)).numpy()


def prepared(task, names, train_labels):
    task.prepare(LabelSpec("names", names), train_labels)
    return task


def setup(kind):
    """(a prepared task, packed targets of one labelled and one unlabelled row, outputs): the
    labelled row is scored right, the unlabelled row's teacher and outputs disagree."""
    if kind is ClassificationTask:
        task = kind()
        targets = np.concatenate(
            [task.distillation.pack(np.array([0]), [[0.9, 0.1]]), task.distillation.pack(None, [[0.9, 0.1]])]
        )
        return task, targets, np.array([[2.0, 0.0], [0.0, 2.0]], np.float32)
    if kind is RegressionTask:
        task = prepared(kind(), [], np.array([0.0, 2.0], np.float32))
        targets = np.concatenate(
            [task.distillation.pack(np.array([1.0], np.float32), [[1.0]]), task.distillation.pack(None, [[1.0]])]
        )
        return task, targets, np.array([[1.0], [5.0]], np.float32)
    task = prepared(kind(), ["a", "b"], None)
    targets = np.concatenate(
        [
            task.distillation.pack(np.array([[1.0, 0.0]], np.float32), [[0.9, 0.1]]),
            task.distillation.pack(None, [[0.9, 0.1]]),
        ]
    )
    return task, targets, np.array([[2.0, -2.0], [-2.0, 2.0]], np.float32)


# The training metric of setup's rows when only its labelled row counts.
PERFECT = {ClassificationTask: 1.0, RegressionTask: 0.0, MultiLabelTask: 1.0}


# --- classification's loss ---------------------------------------------------------------------
def test_a_labelled_rows_loss_is_alpha_cross_entropy_plus_t_squared_kl():
    task, targets = classification_targets()
    cross_entropy = -log_softmax(LOGITS[:2])[[0, 1], CLASSES]
    expected = ALPHA * cross_entropy + (1 - ALPHA) * T**2 * hand_kl(TEACHER[:2], LOGITS[:2], T)
    got = per_row(task.distillation.loss(T, ALPHA), targets, LOGITS)
    np.testing.assert_allclose(got[:2], expected, rtol=1e-5)


def test_an_unlabelled_rows_loss_is_the_kl_term_alone():
    task, targets = classification_targets()
    got = per_row(task.distillation.loss(T, ALPHA), targets, LOGITS)
    np.testing.assert_allclose(got[2], (1 - ALPHA) * T**2 * hand_kl(TEACHER[2:], LOGITS[2:], T)[0], rtol=1e-5)


def test_at_alpha_1_the_loss_is_sparse_categorical_cross_entropy():
    task, targets = classification_targets()
    plain = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    got = task.distillation.loss(T, 1.0)(tf.constant(targets[:2]), tf.constant(LOGITS[:2]))
    np.testing.assert_allclose(float(got), float(plain(CLASSES, LOGITS[:2])), rtol=1e-6)


def test_at_alpha_0_logits_equal_to_the_teachers_log_probabilities_are_a_minimum():
    task, targets = classification_targets()
    logits = tf.Variable(np.log(TEACHER).astype(np.float32))
    with tf.GradientTape() as tape:
        loss = task.distillation.loss(T, 0.0)(tf.constant(targets), logits)
    assert abs(float(loss)) < 1e-6
    assert np.abs(tape.gradient(loss, logits).numpy()).max() < 1e-6


def test_a_teacher_probability_of_zero_gives_a_finite_loss():
    task = ClassificationTask()
    targets = task.distillation.pack(np.array([0]), np.array([[1.0, 0.0, 0.0]]))
    assert np.isfinite(per_row(task.distillation.loss(T, ALPHA), targets, LOGITS[:1])).all()


# --- regression's and multi-label's losses -------------------------------------------------------
def test_regression_loss_is_alpha_and_teacher_squared_errors_in_standard_deviations():
    task = prepared(RegressionTask(), [], np.array([0.0, 4.0], np.float32))  # std 2
    targets = np.concatenate(
        [
            task.distillation.pack(np.array([1.0], np.float32), np.array([[2.0]])),
            task.distillation.pack(None, np.array([[0.0]])),
        ]
    )
    predicted = np.array([[4.0], [1.0]], np.float32)
    expected = [ALPHA * (3 / 2) ** 2 + (1 - ALPHA) * (2 / 2) ** 2, (1 - ALPHA) * (1 / 2) ** 2]
    np.testing.assert_allclose(per_row(task.distillation.loss(T, ALPHA), targets, predicted), expected, rtol=1e-6)


def test_an_unlabelled_regression_rows_gradient_is_finite():
    """Its NaN score is masked before any arithmetic: tf.where alone would let it through the
    gradient (tensorflow/tensorflow#38349)."""
    task = prepared(RegressionTask(), [], np.array([0.0, 2.0], np.float32))
    predicted = tf.Variable([[0.5]])
    with tf.GradientTape() as tape:
        loss = task.distillation.loss(T, ALPHA)(tf.constant(task.distillation.pack(None, np.array([[1.0]]))), predicted)
    assert np.isfinite(tape.gradient(loss, predicted).numpy()).all()


def test_multilabel_loss_is_alpha_and_teacher_binary_cross_entropies():
    task = prepared(MultiLabelTask(), ["a", "b"], None)
    truth, teacher = np.array([[1.0, 0.0]], np.float32), np.array([[0.9, 0.3], [0.2, 0.6]])
    targets = np.concatenate([task.distillation.pack(truth, teacher[:1]), task.distillation.pack(None, teacher[1:])])
    logits = np.array([[1.0, -2.0], [0.5, 0.0]], np.float32)
    p = 1 / (1 + np.exp(-logits.astype(np.float64)))
    bce = lambda y, q: -(y * np.log(q) + (1 - y) * np.log(1 - q)).mean(axis=1)  # noqa: E731
    expected = (1 - ALPHA) * bce(teacher, p)
    expected[0] += ALPHA * bce(truth, p[:1])[0]
    np.testing.assert_allclose(per_row(task.distillation.loss(T, ALPHA), targets, logits), expected, rtol=1e-5)


@pytest.mark.parametrize("kind", [ClassificationTask, RegressionTask, MultiLabelTask])
def test_a_loss_is_rebuilt_from_its_config(kind):
    loss = setup(kind)[0].distillation.loss(T, ALPHA)
    assert type(loss).from_config(loss.get_config()).get_config() == loss.get_config()


# --- the training metric -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [ClassificationTask, RegressionTask, MultiLabelTask])
def test_the_training_metric_keeps_its_name_and_scores_the_labelled_rows_alone(kind):
    task, targets, outputs = setup(kind)
    (metric,) = task.distillation.metrics()
    metric.update_state(tf.constant(targets), tf.constant(outputs), tf.ones([2, 1]))
    assert metric.name == task.train_metric
    assert float(metric.result()) == PERFECT[kind]


@pytest.mark.parametrize("kind", [ClassificationTask, RegressionTask, MultiLabelTask])
def test_a_batch_without_labelled_rows_changes_nothing(kind):
    task, targets, outputs = setup(kind)
    (metric,) = task.distillation.metrics()
    metric.update_state(tf.constant(targets[:1]), tf.constant(outputs[:1]))
    metric.update_state(tf.constant(targets[1:]), tf.constant(outputs[1:]))
    assert float(metric.result()) == PERFECT[kind]


def test_the_training_metric_weighs_rows_by_their_sample_weight_too():
    """A padding row (weight 0) of a static-shape batch is no row."""
    task, targets, outputs = setup(ClassificationTask)
    (metric,) = task.distillation.metrics()
    metric.update_state(tf.constant(targets[:1]), tf.constant(outputs[[1]]), tf.zeros([1]))
    metric.update_state(tf.constant(targets[:1]), tf.constant(outputs[:1]), tf.ones([1]))
    assert float(metric.result()) == 1.0


# --- the teacher file's values -------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind, values, row, words",
    [
        (RegressionTask, [[1.5], [np.nan], [np.inf]], 1, "nan is not a finite number"),
        (ClassificationTask, [[0.5, 0.5], [0.5, np.inf], [0.5, 0.5]], 1, "inf is not a finite number"),
        (ClassificationTask, [[0.5, 0.5], [0.6, 0.5], [0.5, 0.1]], 1, "sum to 1.1, not 1"),
        (ClassificationTask, [[0.5, 0.5], [0.5, 0.5], [1.2, -0.2]], 2, "1.2 is not a probability"),
        (MultiLabelTask, [[0.5, 0.9], [-0.1, 2.0], [0.1, np.nan]], 1, "-0.1 is not a probability"),
        (MultiLabelTask, [[0.5, 0.9], [0.1, np.nan], [-0.1, 2.0]], 1, "nan is not a finite number"),
    ],
)
def test_teacher_problem_names_the_first_bad_row_and_why(kind, values, row, words):
    found = kind().distillation.problem(np.array(values))
    assert found[0] == row and words in found[1]


@pytest.mark.parametrize(
    "kind, values",
    [
        (RegressionTask, [[-3.0], [120.0]]),
        (ClassificationTask, [[0.995, 0.0], [0.3, 0.7]]),  # within 0.01 of 1
        (MultiLabelTask, [[1.0, 1.0], [0.0, 0.3]]),  # a row's labels need not sum to 1
    ],
)
def test_good_teacher_values_have_no_problem(kind, values):
    assert kind().distillation.problem(np.array(values)) is None


def test_teacher_columns_are_those_trainer_predict_writes():
    assert ClassificationTask().distillation.columns(["neg", "pos"]) == ["probability_neg", "probability_pos"]
    assert MultiLabelTask().distillation.columns(["a", "b"]) == ["probability_a", "probability_b"]
    assert RegressionTask().distillation.columns([]) == ["predicted_score"]


# --- packed labels -------------------------------------------------------------------------------
def test_a_classifiers_teacher_rows_are_renormalised_to_sum_to_1():
    packed = ClassificationTask().distillation.pack(np.array([1]), np.array([[0.2, 0.798]]))
    np.testing.assert_allclose(packed[0, 1:].sum(), 1.0, rtol=1e-7)


PLAIN = {
    ClassificationTask: np.array([2, 0, 1], np.int32),
    RegressionTask: np.array([0.25, -3.5, 7.125], np.float32),
    MultiLabelTask: np.array([[1, 0], [0, 0], [1, 1]], np.float32),
}
WIDTH = {ClassificationTask: 3, RegressionTask: 1, MultiLabelTask: 2}


@pytest.mark.parametrize("kind", [ClassificationTask, RegressionTask, MultiLabelTask])
def test_packed_labels_unpack_to_the_plain_labels_exactly(kind):
    task = prepared(kind(), ["a", "b"], PLAIN[kind])
    teacher = np.full((3, WIDTH[kind]), 1.0 / WIDTH[kind])
    packed = task.distillation.pack(PLAIN[kind], teacher)
    unpacked = task.distillation.unpack(packed)
    assert (
        packed.dtype == np.float32
        and task.distillation.is_packed(packed)
        and not task.distillation.is_packed(PLAIN[kind])
    )
    assert unpacked.dtype == PLAIN[kind].dtype and unpacked.shape == PLAIN[kind].shape
    np.testing.assert_array_equal(unpacked, PLAIN[kind])


# --- the teacher, scored as the student ----------------------------------------------------------
def test_a_teacher_classifier_scores_the_accuracy_of_its_most_probable_classes():
    teacher, labels = np.array([[0.7, 0.3, 0.0], [0.2, 0.3, 0.5], [0.1, 0.6, 0.3]]), np.array([0, 1, 1])
    task = ClassificationTask()
    result = task.summarize(task.distillation.outputs(teacher), labels, ["a", "b", "c"])
    assert result["accuracy"] == pytest.approx(2 / 3)
    assert result["loss"] == pytest.approx(-np.mean(np.log([0.7, 0.3, 0.6])))


def test_a_teacher_multilabel_model_scores_its_decisions_at_the_tasks_thresholds():
    teacher, labels = np.array([[0.9, 0.0], [0.5, 1.0], [0.2, 0.4]]), np.array([[1, 0], [0, 1], [1, 0]])
    task = MultiLabelTask()
    result = task.summarize(task.distillation.outputs(teacher), labels, ["a", "b"])
    assert result["subset_accuracy"] == pytest.approx(1 / 3)  # the second row's 0.5 gives it a
    assert result["micro_f1"] == pytest.approx(2 * 2 / (3 + 3))


def test_a_teacher_regressor_scores_its_own_scores():
    task = prepared(RegressionTask(), [], np.array([0.0, 2.0], np.float32))
    result = task.summarize(task.distillation.outputs(np.array([[1.0], [2.0], [4.0]])), np.array([1.0, 3.0, 3.0]), [])
    assert result["mse"] == pytest.approx(2 / 3) and result["mae"] == pytest.approx(2 / 3)


def test_a_classifiers_agreement_is_the_share_of_rows_given_the_teachers_class():
    teacher = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4]])
    assert ClassificationTask().distillation.agreement(
        teacher, np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 1.0]])
    ) == pytest.approx(2 / 3)


def test_a_multilabel_agreement_is_the_share_of_rows_given_the_teachers_whole_label_set():
    task = MultiLabelTask()
    task.thresholds = np.array([0.5, 0.9])
    teacher = np.array([[0.9, 0.95], [0.9, 0.8], [0.1, 0.1]])
    logits = np.array([[2.0, 3.0], [2.0, 3.0], [-2.0, -2.0]])  # sigmoid(3) = 0.95: b given
    assert task.distillation.agreement(teacher, logits) == pytest.approx(2 / 3)


def test_a_regressor_has_no_decisions_to_agree_on():
    assert RegressionTask().distillation.agreement(np.array([[1.0]]), np.array([[1.0]])) is None


# --- a run with a teacher ------------------------------------------------------------------------
DISTILLATION = types.SimpleNamespace(distill_temperature=T, distill_alpha=ALPHA)


def test_with_a_teacher_the_kind_compiles_its_distillation_loss_and_metrics():
    task = ClassificationTask()
    loss, metrics = task.compiled_with(DISTILLATION)
    assert isinstance(loss, type(task.distillation.loss(T, ALPHA)))
    assert [m.name for m in metrics] == [m.name for m in task.distillation.metrics()]


def test_without_a_teacher_the_kind_compiles_its_own_loss_and_metrics():
    task = ClassificationTask()
    loss, metrics = task.compiled_with(None)
    assert isinstance(loss, type(task.loss()))
    assert [m.name for m in metrics] == [m.name for m in task.keras_metrics()]


def test_packed_labels_are_summarized_and_counted_as_plain_ones():
    task, targets = classification_targets()
    labelled = targets[:2]
    spec = LabelSpec("names", ["a", "b", "c"])
    assert task.summarize(LOGITS[:2], task.plain(labelled), spec.names) == task.summarize(
        LOGITS[:2], CLASSES, spec.names
    )
    assert task.label_counts(task.plain(labelled), spec) == {"a": 1, "b": 0, "c": 1}
    assert task.label_counts(task.plain(CLASSES), spec) == {"a": 1, "b": 0, "c": 1}


@pytest.mark.parametrize("kind", [ClassificationTask, RegressionTask, MultiLabelTask])
def test_a_model_compiled_with_distilled_loss_and_metrics_trains_on_packed_labels(kind):
    base, targets, outputs = setup(kind)
    loss, metrics = base.compiled_with(DISTILLATION)
    tf_keras.utils.set_random_seed(0)
    model = tf_keras.Sequential([tf_keras.layers.Dense(outputs.shape[1], input_shape=(4,))])
    model.compile(optimizer="sgd", loss=loss, metrics=metrics)
    history = model.fit(
        np.ones((2, 4), np.float32), targets, sample_weight=np.ones(2, np.float32), batch_size=2, epochs=1, verbose=0
    ).history
    assert np.isfinite(history["loss"][0]) and base.train_metric in history


def test_a_multi_label_task_reads_labels_as_plain_before_it_is_prepared():
    """The training split's label counts are taken as the data loads, before the task learns its
    number of labels (Task.prepare); no label is packed then."""
    labels = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    np.testing.assert_array_equal(MultiLabelTask().plain(labels), labels)
