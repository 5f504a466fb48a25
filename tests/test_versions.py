"""The start-up and image-build check of the TensorFlow stack: one TensorFlow build, whose minor
version tf-keras and TF-Text share (TF 2.20 and 2.21 are both supported)."""

from importlib import metadata

import pytest

from trainer import versions
from trainer.errors import UserError


@pytest.fixture
def installed(monkeypatch):
    """Pretend exactly the given {distribution: version} are installed."""

    def install(found):
        def version(name):
            if name not in found:
                raise metadata.PackageNotFoundError(name)
            return found[name]

        monkeypatch.setattr(versions.metadata, "version", version)

    return install


@pytest.mark.parametrize(
    "stack",
    [
        {"tensorflow": "2.21.0", "tf-keras": "2.21.0", "tensorflow-text": "2.21.1"},
        {"tensorflow": "2.20.0", "tf-keras": "2.20.1", "tensorflow-text": "2.20.1"},
    ],
)
def test_both_supported_minors_pass(installed, stack):
    installed(stack)
    versions.check_coupled_versions()


def test_the_tpu_build_counts_as_tensorflow(installed):
    installed({"tensorflow-tpu": "2.20.0", "tf-keras": "2.20.1", "tensorflow-text": "2.20.1"})
    versions.check_coupled_versions()
    assert versions.tensorflow_version() == {"tensorflow-tpu": "2.20.0"}


def test_a_tpu_build_beside_the_tf_keras_of_another_minor_is_refused_naming_both(installed):
    installed({"tensorflow-tpu": "2.20.0", "tf-keras": "2.21.0", "tensorflow-text": "2.20.1"})
    with pytest.raises(UserError, match=r"tensorflow==2\.20\.0.*tf-keras==2\.21\.0"):
        versions.check_coupled_versions()


def test_two_tensorflow_builds_in_one_environment_are_refused(installed):
    """What tf-keras installed with its dependencies next to tensorflow-tpu leaves behind."""
    installed({"tensorflow": "2.20.0", "tensorflow-tpu": "2.20.0", "tf-keras": "2.20.1", "tensorflow-text": "2.20.1"})
    with pytest.raises(
        UserError, match=r"more than one TensorFlow build.*tensorflow==2\.20\.0, tensorflow-tpu==2\.20\.0"
    ):
        versions.check_coupled_versions()


def test_the_image_check_names_the_tensorflow_build_it_expected(installed, monkeypatch):
    installed({"tensorflow": "2.20.0", "tf-keras": "2.20.1", "tensorflow-text": "2.20.1"})
    monkeypatch.setattr(versions, "unmet_requirements", lambda: [])
    with pytest.raises(UserError, match="expected the TensorFlow build tensorflow-tpu, found tensorflow==2.20.0"):
        versions.main(["tensorflow-tpu"])


def test_a_tpu_build_meets_the_trainers_tensorflow_requirement(installed, monkeypatch):
    installed({"tensorflow-tpu": "2.20.0", "numpy": "2.4.6"})
    monkeypatch.setattr(
        versions.metadata,
        "requires",
        lambda name: ["tensorflow>=2.20,<2.22", "numpy>=1.26", "pandas>=2.0", "pytest>=8; extra == 'test'"],
    )
    assert versions.unmet_requirements() == ["pandas>=2.0 (installed: none)"]
