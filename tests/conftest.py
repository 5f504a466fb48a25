import os
import sys

import pytest

# Tests import the package the way users do; this keeps TensorFlow quiet and on Keras 2 too.
import trainer  # noqa: F401

sys.path.insert(0, os.path.dirname(__file__))
import tiny_bert  # noqa: E402


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory):
    """A tiny BERT checkpoint in Hugging Face layout, usable as `--encoder DIR`."""
    return tiny_bert.write_hf_checkpoint(tmp_path_factory.mktemp("tiny_bert"))
