"""DistilBERT's own parts, beyond the shared family parity (tests/modeling/encoders/test_encoder_families.py): the
classifiers fine-tuned from it (its "distilbert." prefix), the cased multilingual model's
tokenizer setting, position tables written as sinusoids, and the settings it refuses."""

import json

import hf_reference
import pytest
import reference_distilbert
import tensorflow as tf

from trainer.errors import UserError
from trainer.modeling import encoders

torch = pytest.importorskip("torch")

IDS = [[4, 7, 8, 10, 11, 28, 5], [4, 21, 14, 5, 0, 0, 0]]  # [CLS] ... [SEP], then [PAD]
MASK = [[1] * 7, [1, 1, 1, 1, 0, 0, 0]]


def _sequence_output(directory):
    encoder = encoders.load_encoder(directory, seq_length=16, cache_dir=directory)
    return encoder.network(hf_reference.features(IDS, MASK))["sequence_output"]


def _equals_the_reference(directory):
    reference = hf_reference.hidden_states(directory, IDS, MASK)["sequence_output"]
    return hf_reference.max_difference(_sequence_output(directory), reference, MASK) <= 1e-4


def test_a_fine_tuned_classifiers_encoder_equals_the_reference(tmp_path):
    """DistilBertForSequenceClassification: the encoder under "distilbert.", beside its
    pre_classifier and classifier, which the encoder leaves out."""
    import transformers

    torch.manual_seed(0)
    model = transformers.DistilBertForSequenceClassification(reference_distilbert.tiny_config())
    model.save_pretrained(tmp_path, safe_serialization=True)
    reference_distilbert.write_tokenizer(str(tmp_path))
    assert _equals_the_reference(str(tmp_path))


def test_a_position_table_written_as_sinusoids_is_read_as_the_checkpoints_weights(tmp_path):
    """transformers stores the sinusoidal table as the position embeddings' weight and loads it
    back as any other: the network computes such a checkpoint as it is."""
    config = reference_distilbert.tiny_config()
    config.sinusoidal_pos_embds = True
    assert _equals_the_reference(hf_reference.write_checkpoint("distilbert", tmp_path, config))


def test_a_cased_tokenizer_config_keeps_case_as_the_fast_tokenizer_does(tmp_path):
    """distilbert-base-multilingual-cased's tokenizer_config.json says do_lower_case false."""
    directory = hf_reference.write_checkpoint("distilbert", tmp_path)
    reference_distilbert.write_tokenizer(directory, lower_case=False)
    texts = ["I love THIS movie !", "i love this movie !"]
    preprocessor = encoders.load_encoder(directory, seq_length=12, cache_dir=directory).preprocessor
    expected = hf_reference.fast_tokenizer(directory)(texts, padding="max_length", max_length=12)
    assert preprocessor(tf.constant(texts))["input_word_ids"].numpy().tolist() == expected["input_ids"]
    assert expected["input_ids"][0] != expected["input_ids"][1]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return hf_reference.write_checkpoint("distilbert", tmp_path_factory.mktemp("distilbert"))


def _with_config(source, directory, **changes) -> str:
    import shutil

    shutil.copytree(source, directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, **changes}))
    return str(directory)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"activation": "relu"},
            r" sets activation \"relu\"; the native distilbert encoder computes "
            r"gelu, gelu_new, gelu_pytorch_tanh, gelu_fast",
        ),
        ({"dim": 30}, r": dim 30 is not a multiple of n_heads 4"),
    ],
    ids=["activation", "heads"],
)
def test_a_setting_the_network_does_not_compute_is_one_error_naming_the_file_and_key(
    checkpoint, tmp_path, changes, message
):
    directory = _with_config(checkpoint, tmp_path / "edited", **changes)
    with pytest.raises(UserError, match=rf"^--encoder: {directory}/config\.json{message}$"):
        encoders.check_encoder(directory)


def test_a_config_without_its_default_keys_reads_as_transformers_reads_it(checkpoint):
    """DistilBertConfig's defaults fill what config.json leaves out (here the dropout rates and
    the activation, which the tiny config has at their defaults): the same network."""
    from trainer.modeling.encoders import checkpoints, families

    raw = json.loads(open(f"{checkpoint}/config.json").read())
    sparse = {key: value for key, value in raw.items() if key not in ("dropout", "attention_dropout", "activation")}
    family = families.family_of(sparse, "config.json")
    assert family.read_config(sparse, "config.json") == family.read_config(raw, "config.json")
    assert checkpoints.read_hf_checkpoint(checkpoint).config == family.read_config(raw, "config.json")
