"""--encoder-layers K: K of the encoder's layers, evenly spaced, each from its pretrained weights.

For every family, a 2-layer encoder kept from a 3-layer checkpoint (layers 0 and 2) computes
what transformers' PyTorch model computes with the same layers kept: the selection, the
renumbering and each family's per-layer settings are those of the reference.
"""

import hf_reference
import pytest

from trainer.errors import UserError
from trainer.modeling.encoders import depth

pytest.importorskip("torch")

SENTENCES = ["i love this movie !", "the movie was not good , so bad", "meh"]


def test_evenly_spaced_layers_keep_the_first_and_last_as_distilbert_did():
    assert depth.evenly_spaced(12, 6) == (0, 2, 4, 7, 9, 11)  # DistilBERT's choice from BERT-base
    assert depth.evenly_spaced(6, 3) == (0, 2, 5)
    assert depth.evenly_spaced(6, 1) == (0,)


def test_kept_layers_are_renumbered_and_the_rest_dropped():
    weights = {
        "word_embeddings/embeddings": 1,
        "transformer/layer_0/output/kernel": 10,
        "transformer/layer_1/output/kernel": 11,
        "transformer/layer_2/output/kernel": 12,
        "pooler_transform/kernel": 2,
    }
    assert depth.renumbered(weights, (0, 2)) == {
        "word_embeddings/embeddings": 1,
        "transformer/layer_0/output/kernel": 10,
        "transformer/layer_1/output/kernel": 12,
        "pooler_transform/kernel": 2,
    }


def three_layers(config):
    """The family's tiny config with 3 layers (ModernBERT's attention kinds recomputed)."""
    config.num_hidden_layers = 3
    if getattr(config, "layer_types", None) is not None:
        every = getattr(config, "global_attn_every_n_layers", 3)
        config.layer_types = ["full_attention" if i % every == 0 else "sliding_attention" for i in range(3)]
    return config


@pytest.fixture(scope="module", params=sorted(hf_reference.families()))
def three_layer_dir(request, tmp_path_factory):
    family = request.param
    directory = tmp_path_factory.mktemp(f"{family}-3")
    config = three_layers(hf_reference.families()[family].tiny_config())
    return hf_reference.write_checkpoint(family, directory, config=config)


def reference_with_layers(directory, kept, encoded):
    """transformers' model with only the `kept` layers of its stack, in order."""
    import torch
    import transformers

    model = transformers.AutoModel.from_pretrained(directory).eval()
    stack = next(m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == 3)
    kept_modules = torch.nn.ModuleList([stack[i] for i in kept])
    for parent in model.modules():
        for name, child in parent.named_children():
            if child is stack:
                setattr(parent, name, kept_modules)
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(encoded["input_ids"]), attention_mask=torch.tensor(encoded["attention_mask"])
        )
    return out.last_hidden_state.numpy()


def test_a_shallower_encoder_computes_what_the_reference_computes_with_those_layers(three_layer_dir):
    from trainer.modeling.encoders import load_encoder

    encoded = hf_reference.fast_tokenizer(three_layer_dir)(
        SENTENCES, padding="max_length", truncation=True, max_length=24
    )
    reference = reference_with_layers(three_layer_dir, (0, 2), encoded)
    encoder = load_encoder(three_layer_dir, seq_length=24, cache_dir=three_layer_dir, layers=2)
    ours = encoder.network(hf_reference.features(encoded["input_ids"], encoded["attention_mask"]))
    assert len(ours["encoder_outputs"]) == 2
    assert "2 layers (--encoder-layers: layers 0, 2 of the checkpoint's)" in encoder.architecture
    assert hf_reference.max_difference(ours["sequence_output"], reference, encoded["attention_mask"]) <= 1e-4


def test_more_layers_than_the_checkpoint_has_is_one_error(three_layer_dir):
    from trainer.modeling.encoders import load_encoder

    with pytest.raises(UserError, match=r"^--encoder-layers: 4 is more than the 3 layers of "):
        load_encoder(three_layer_dir, seq_length=24, cache_dir=three_layer_dir, layers=4)


def test_the_hub_backend_keeps_its_savedmodels_layers():
    from trainer.modeling.encoders import load_encoder

    with pytest.raises(UserError, match=r"^--encoder-layers: needs --encoder-backend native"):
        load_encoder("small-bert-l2-h128-uncased", backend="hub", layers=1)


def test_a_config_with_zero_layers_is_refused_by_flag():
    from trainer.config import build_config

    with pytest.raises(UserError, match=r"^--encoder-layers: must be at least 1, got 0"):
        build_config(["--encoder-layers", "0"], {})


@pytest.mark.slow  # a real run with both copies: run by hand (docs/testing.md), not in CI
def test_a_shallower_run_exports_its_copies_and_predicts(tiny_encoder_dir, tiny_data, tmp_path):
    """The export, the int8 and bfloat16 copies (rebuilt from the config) and prediction work
    unchanged on a 1-layer encoder kept from the tiny 2-layer one."""
    import json

    from conftest import read_csv
    from test_predict import run_cli
    from test_task import train_args

    job = tmp_path / "job"
    result = run_cli(
        "trainer.task",
        *train_args(
            tiny_encoder_dir, tiny_data, job, "--encoder-layers", "1", "--export-int8", "on", "--export-bfloat16", "on"
        ),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = json.loads((job / "metrics.json").read_text())
    assert metrics["hyperparameters"]["encoder_layers"] == 1
    assert "1 layers (--encoder-layers: layers 0 of the checkpoint's)" in metrics["device"]["encoder_architecture"]
    assert metrics["precisions"]["int8"]["written"] and metrics["precisions"]["bfloat16"]["written"]
    for precision in ("float32", "int8", "bfloat16"):
        out = tmp_path / f"{precision}.csv"
        predicted = run_cli(
            "trainer.predict",
            "--model-dir",
            job / "model",
            "--input",
            tiny_data["test"],
            "--output",
            out,
            "--precision",
            precision,
        )
        assert predicted.returncode == 0, predicted.stderr
        assert len(read_csv(out)) == 30
