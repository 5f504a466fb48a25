"""The native families' published configs, as checkpoints with random weights, for the benchmarks.

Nothing can be downloaded from the Hugging Face Hub here, and neither parity nor speed depends
on trained weights, so each published model is written by transformers itself
(tests/helpers/hf_reference.py: AutoModel.from_config with a fixed torch seed, save_pretrained) at its
published config, with its family's tiny tokenizer files from tests/reference_<family>.py (the
loader needs them; the benchmarks feed ids or measure the network, not the tokenizer).
Checkpoints are kept under bench/work/published/ for reruns (roberta-large takes a minute).
"""

import os
import shutil
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..", "tests", "helpers")]
from common import WORK  # noqa: E402

_ROBERTA = dict(
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=514,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
)


@dataclass(frozen=True)
class Published:
    """A published model: its family (tests/reference_<family>.py), config, and the ids a
    batch is built from. `pair_seps`: separators between a pair's texts (RoBERTa's `</s></s>`);
    `types`: whether its tokenizer gives token_type_ids."""

    family: str
    config: dict
    cls: int
    sep: int
    pad: int
    specials: tuple
    pair_seps: int = 1
    types: bool = False

    def transformers_config(self, **overrides):
        import transformers

        config = dict(self.config, **overrides)
        return transformers.AutoConfig.for_model(config.pop("model_type"), **config)


PUBLISHED = {
    "roberta-base": Published(
        "roberta",
        dict(model_type="roberta", vocab_size=50265, **_ROBERTA),
        cls=0,
        sep=2,
        pad=1,
        specials=(0, 1, 2, 3, 50264),
        pair_seps=2,
    ),
    "roberta-large": Published(
        "roberta",
        dict(
            model_type="roberta",
            vocab_size=50265,
            **dict(_ROBERTA, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
        ),
        cls=0,
        sep=2,
        pad=1,
        specials=(0, 1, 2, 3, 50264),
        pair_seps=2,
    ),
    "xlm-roberta-base": Published(
        "xlm_roberta",
        dict(model_type="xlm-roberta", vocab_size=250002, **_ROBERTA),
        cls=0,
        sep=2,
        pad=1,
        specials=(0, 1, 2, 3, 250001),
        pair_seps=2,
    ),
    "mpnet-base": Published(
        "mpnet",
        dict(
            model_type="mpnet",
            vocab_size=30527,
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            max_position_embeddings=514,
            layer_norm_eps=1e-5,
            relative_attention_num_buckets=32,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
        ),
        cls=0,
        sep=2,
        pad=1,
        specials=(0, 1, 2, 3, 30526),
        pair_seps=2,
    ),
    "deberta-v3-base": Published(
        "deberta_v2",
        dict(
            model_type="deberta-v2",
            vocab_size=128100,
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            hidden_act="gelu",
            hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1,
            max_position_embeddings=512,
            type_vocab_size=0,
            initializer_range=0.02,
            layer_norm_eps=1e-7,
            relative_attention=True,
            max_relative_positions=-1,
            pad_token_id=0,
            position_biased_input=False,
            pos_att_type=["p2c", "c2p"],
            position_buckets=256,
            share_att_key=True,
            norm_rel_ebd="layer_norm",
        ),
        cls=1,
        sep=2,
        pad=0,
        specials=(0, 1, 2, 3, 128000),
        types=True,
    ),
    # answerdotai/ModernBERT-base: transformers' ModernBertConfig defaults are its config
    # (22 layers, 768/1152, windows of 128 every layer but each third, rope 160k/10k).
    "modernbert-base": Published(
        "modernbert",
        dict(
            model_type="modernbert",
            vocab_size=50368,
            pad_token_id=50283,
            cls_token_id=50281,
            sep_token_id=50282,
            bos_token_id=50281,
            eos_token_id=50282,
        ),
        cls=50281,
        sep=50282,
        pad=50283,
        specials=(50280, 50281, 50282, 50283, 50284),
    ),
    # distilbert/distilbert-base-uncased and -multilingual-cased: transformers' DistilBertConfig
    # defaults are their shape; BERT's vocabularies, [PAD] 0 and [UNK] [CLS] [SEP] [MASK] 100-103.
    **{
        name: Published(
            "distilbert",
            dict(
                model_type="distilbert",
                vocab_size=vocab_size,
                dim=768,
                n_layers=6,
                n_heads=12,
                hidden_dim=3072,
                max_position_embeddings=512,
                sinusoidal_pos_embds=False,
                activation="gelu",
                pad_token_id=0,
            ),
            cls=101,
            sep=102,
            pad=0,
            specials=(0, 100, 101, 102, 103),
        )
        for name, vocab_size in (("distilbert-base-uncased", 30522), ("distilbert-base-multilingual-cased", 119547))
    },
}


def checkpoint(name: str, root: str | None = None, config=None) -> str:
    """The directory of `name`'s checkpoint (written once, atomically: a killed write is redone).
    `config`: a transformers config to write instead of the published one (the benches' tests)."""
    import hf_reference

    directory = os.path.join(root or os.path.join(WORK, "published"), name)
    if os.path.exists(os.path.join(directory, "config.json")):
        return directory
    partial = directory + ".part"
    shutil.rmtree(partial, ignore_errors=True)
    published = PUBLISHED[name]
    hf_reference.write_checkpoint(published.family, partial, config or published.transformers_config(), seed=0)
    os.replace(partial, directory)
    return directory
