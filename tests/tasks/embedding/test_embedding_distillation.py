"""Embeddings learn from a teacher's vectors (issue #68, item 5; trainer/tasks/embedding/teacher.py
and distill.py): packed targets beside the variant's labels, the squared distance of each text's
unit vector to the teacher's, a wider teacher read in its principal axes, and a run distilled
end to end from a tiny teacher's export."""

import json

import numpy as np
import pytest
from conftest import metrics_of
from test_embedding import args, data, quiet_encoder_dir  # noqa: F401  (fixtures)
from test_task import run_cli

from trainer.data import teacher_file
from trainer.errors import UserError
from trainer.tasks.embedding import EmbeddingTask
from trainer.tasks.embedding.teacher import principal_axes


def variant(loss):
    return EmbeddingTask.with_settings({"loss": loss})


def test_a_packed_row_holds_its_labels_a_labelled_flag_and_the_teachers_unit_vectors():
    part = variant("cosent").distillation
    packed = part.pack(np.array([4.5, 1.0], np.float32), [[3, 4, 0, 2], [1, 0, 0, 1]])
    np.testing.assert_allclose(packed, [[4.5, 1, 0.6, 0.8, 0, 1], [1.0, 1, 1, 0, 0, 1]])
    unlabelled = part.pack(None, [[0, 5, 5, 0]])
    np.testing.assert_allclose(unlabelled, [[-1, 0, 0, 1, 1, 0]])


def test_packed_targets_unpack_to_the_variants_labels_and_plain_ids_are_not_packed():
    part = variant("multiple-negatives").distillation
    ids = np.array([[0, 1], [2, 3]], np.int64)
    assert not part.is_packed(ids)  # a pair's text ids are two columns too
    packed = part.pack(ids, np.ones([2, 6]))
    assert part.is_packed(packed) and packed.shape == (2, 2 + 1 + 2 * 3)
    unpacked = part.unpack(packed)
    assert unpacked.dtype == np.int64 and unpacked.tolist() == ids.tolist()


def test_the_teacher_is_one_vector_per_text_of_a_pair_and_none_of_its_hard_negative():
    assert variant("cosent").distillation.columns(None) == ["embedding", "pair_embedding"]
    assert variant("multiple-negatives").distillation.columns(None) == ["embedding", "pair_embedding"]
    assert variant("supervised-contrastive").distillation.columns(None) == ["embedding"]


def test_principal_axes_are_orthonormal_largest_variance_first_and_the_same_when_fitted_again():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=[500, 4]) * [1.0, 5.0, 0.5, 2.0]
    axes = principal_axes(vectors)
    np.testing.assert_allclose(axes.T @ axes, np.eye(4), atol=1e-5)
    assert np.argmax(np.abs(axes[:, 0])) == 1 and np.argmax(np.abs(axes[:, 1])) == 3
    np.testing.assert_array_equal(principal_axes(vectors[::-1]), axes)


def distilled(loss="cosent", alpha=0.0, dims=(), teacher_width=3):
    task = EmbeddingTask.with_settings({"loss": loss, "embedding_dims": ",".join(map(str, dims)) or None})
    rng = np.random.default_rng(1)
    labels = np.array([4.0, 1.0, 3.0, 2.0], np.float32) if loss == "cosent" else np.arange(8).reshape(4, 2)
    packed = task.distillation.pack(labels, rng.normal(size=[4, 2 * teacher_width]))
    return task, packed


def test_a_student_on_the_teachers_vectors_costs_nothing_and_an_orthogonal_one_two():
    import tensorflow as tf

    task, packed = distilled()
    loss, _ = task.compiled_with(DistillationSettings(alpha=0.0))
    teacher = packed[:, 2:].reshape(4, 2, 3)
    assert float(loss(packed, tf.constant(teacher * 3.0))) == pytest.approx(0.0, abs=1e-6)
    orthogonal = np.cross(teacher, np.roll(teacher, 1, axis=1))  # ⟂ to each text's teacher vector
    assert float(loss(packed, tf.constant(orthogonal))) == pytest.approx(2.0, abs=1e-5)


def test_alpha_one_is_the_variants_loss_of_the_labelled_rows_alone():
    import tensorflow as tf

    task, packed = distilled()
    unlabelled = task.distillation.pack(None, np.ones([2, 6]))
    vectors = tf.constant(np.random.default_rng(2).normal(size=[6, 2, 3]), tf.float32)
    loss, _ = task.compiled_with(DistillationSettings(alpha=1.0))
    expected = task.loss()(packed[:, 0], vectors[:4])
    assert float(loss(np.concatenate([packed, unlabelled]), vectors)) == pytest.approx(float(expected), rel=1e-5)


def test_a_wider_teacher_is_learned_in_its_leading_principal_axes():
    import tensorflow as tf

    task, packed = distilled(teacher_width=5)
    rotation = task.distillation.rotation
    teacher = packed[:, 2:].reshape(4, 2, 5)
    student = teacher @ rotation[:, :3]  # the teacher's first three principal coordinates
    loss, _ = task.compiled_with(DistillationSettings(alpha=0.0))
    assert float(loss(packed, tf.constant(student))) == pytest.approx(0.0, abs=1e-6)
    assert float(loss(packed, tf.constant(teacher[..., :3]))) > 0.01  # not its first three numbers


def test_with_nested_dims_each_part_learns_as_many_principal_axes():
    import tensorflow as tf

    task, packed = distilled(dims=(3, 2))
    student = packed[:, 2:].reshape(4, 2, 3) @ task.distillation.rotation
    loss, _ = task.compiled_with(DistillationSettings(alpha=0.0))
    assert float(loss(packed, tf.constant(student))) == pytest.approx(0.0, abs=1e-6)


def test_a_student_wider_than_its_teacher_is_one_line():
    task, _ = distilled(teacher_width=3)
    with pytest.raises(UserError, match="the teacher's vectors are 3 wide, narrower than the student's 16"):
        task.distillation.check_width(16)


def test_the_training_metric_counts_the_labelled_rows_alone():
    import tensorflow as tf

    task, packed = distilled()
    unlabelled = task.distillation.pack(None, np.ones([4, 6]))
    _, (metric,) = task.compiled_with(DistillationSettings(alpha=0.5))
    vectors = tf.constant(np.random.default_rng(3).normal(size=[8, 2, 3]), tf.float32)
    metric.update_state(np.concatenate([packed, unlabelled]), vectors)
    plain = task.keras_metrics()[0]
    plain.update_state(packed[:, 0], vectors[:4])
    assert metric.name == "pair_order" and float(metric.result()) == pytest.approx(float(plain.result()))


class DistillationSettings:
    """The config's distillation block, as Task.compiled_with reads it."""

    def __init__(self, alpha):
        self.distill_temperature, self.distill_alpha = 2.0, alpha


# --- the teacher's file ---------------------------------------------------------------------------


def test_a_teacher_file_of_vectors_is_read_as_trainer_predict_writes_it(tmp_path):
    path = tmp_path / "teacher.csv"
    path.write_text('text,embedding,cosine\nso good,"[0.6, 0.8]",1\nbad,"[1, 0]",1\n')
    teacher = teacher_file.read(str(path), ["text"], ["embedding"])
    assert sorted(teacher.values.tolist()) == [[0.6, 0.8], [1.0, 0.0]]


def test_a_vector_cell_that_is_not_a_list_of_numbers_is_one_line_naming_its_line(tmp_path):
    path = tmp_path / "teacher.csv"
    path.write_text('text,embedding\nso good,"[0.6, 0.8]"\nbad,"[1, 0, 2]"\n')
    with pytest.raises(UserError, match=r"teacher.csv line 3: column 'embedding' holds '\[1, 0, 2\]', not a list of 2"):
        teacher_file.read(str(path), ["text"], ["embedding"])


def test_vectors_of_another_length_in_a_later_chunk_are_one_line_naming_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(teacher_file, "CHUNK_ROWS", 1)
    path = tmp_path / "teacher.csv"
    path.write_text('text,embedding\nso good,"[0.6, 0.8]"\nbad,"[1, 0, 2]"\n')
    with pytest.raises(UserError, match=r"teacher.csv line 3: 3 outputs, not 2"):
        teacher_file.read(str(path), ["text"], ["embedding"])


def test_a_classifiers_teacher_file_is_refused_by_an_embedding_run(tmp_path):
    path = tmp_path / "teacher.csv"
    path.write_text("text,probability_negative,probability_positive\nso good,0.1,0.9\n")
    with pytest.raises(UserError, match=r"holds the teacher outputs \['probability_negative', 'probability_posi"):
        teacher_file.read(str(path), ["text"], ["embedding"])


# --- end to end -----------------------------------------------------------------------------------


@pytest.mark.slow  # two runs: a teacher and its student (CI's slow line)
def test_a_shallower_student_learns_a_teachers_vectors_with_unlabeled_pairs(quiet_encoder_dir, data, tmp_path):  # noqa: F811
    teacher_dir = tmp_path / "teacher"
    result = run_cli(*args(quiet_encoder_dir, data, teacher_dir, "--epochs", "10"))
    assert result.returncode == 0, result.stderr
    unlabeled = tmp_path / "unlabeled.csv"
    unlabeled.write_text("sentence1,sentence2\n" + "".join(f"{a} !,{b} .\n" for a, b in PAIRS))
    student = tmp_path / "student"
    result = run_cli(
        *args(quiet_encoder_dir, data, student, "--epochs", "10", "--encoder-layers", "1"),
        "--teacher",
        teacher_dir / "model",
        "--unlabeled-file",
        unlabeled,
    )
    assert result.returncode == 0, result.stderr
    block = metrics_of(student)["distillation"]
    assert block["transfer_set"] == {"train": 160, "unlabeled": len(PAIRS)}
    teacher_score = json.loads((teacher_dir / "metrics.json").read_text())["validation"]["spearman"]
    assert block["validation"]["teacher"]["spearman"] == pytest.approx(teacher_score, abs=1e-6)
    zero_shot = metrics_of(student)["zero_shot"]["validation"]["spearman"]
    assert block["validation"]["student"]["spearman"] > zero_shot + 0.2


PAIRS = [("i love it", "so bad"), ("great movie", "it was great"), ("awful", "so good")] * 20
