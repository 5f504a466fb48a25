"""MPNet (Song et al. 2020; sentence-transformers' all-mpnet-base-v2): a BERT encoder with
RoBERTa's positions, no token types, and one relative-position bias shared by all layers.

Read against Hugging Face's modeling_mpnet.py: MPNetEmbeddings (word + position, LayerNorm),
MPNetEncoder.compute_position_bias (32 T5-style buckets from positions 0..T-1, added to every
layer's attention logits), MPNetLayer (post-LN, as BERT's). Its tokenizer is BERT's WordPiece
with `<s>`/`</s>` around the text and `</s></s>` between a pair's texts (MPNetTokenizer).
"""

from trainer.modeling.encoders.models import Family, bert
from trainer.modeling.encoders.preprocessing import SpecialTokens
from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

# MPNet's vocab.txt is BERT's with <s>, <pad>, </s>, <unk> in front; its tokenizer keeps [UNK]
# and packs as RoBERTa does.
SPECIAL = SpecialTokens("<pad>", "[UNK]", "<s>", "</s>", ("</s>",), typed_pairs=False)

# (native sublayer, Hugging Face module) of one MPNetLayer.
_BLOCK_PARTS = [
    ("self_attention/query", "attention.attn.q"),
    ("self_attention/key", "attention.attn.k"),
    ("self_attention/value", "attention.attn.v"),
    ("self_attention/attention_output", "attention.attn.o"),
    ("self_attention_layer_norm", "attention.LayerNorm"),
    ("intermediate", "intermediate.dense"),
    ("output", "output.dense"),
    ("output_layer_norm", "output.LayerNorm"),
]


def read_config(raw: dict, path: str):
    return bert.read_config(
        {**raw, "type_vocab_size": 0},
        path,
        position_padding_id=raw.get("pad_token_id", 1),
        relative_attention_buckets=raw.get("relative_attention_num_buckets", 32),
    )


def map_weights(config, get) -> dict:
    weights = {
        "word_embeddings/embeddings": get("embeddings.word_embeddings.weight"),
        "position_embedding/embeddings": get("embeddings.position_embeddings.weight"),
        "relative_attention_bias/embeddings": get("encoder.relative_attention_bias.weight"),
        **bert.hf_layer_norm(get, "embeddings/layer_norm", "embeddings.LayerNorm"),
    }
    if get("pooler.dense.weight", required=False) is not None:
        weights.update(bert.hf_dense(get, "pooler_transform", "pooler.dense"))
    for i in range(config.num_layers):
        for native, module in _BLOCK_PARTS:
            read = bert.hf_layer_norm if "layer_norm" in native else bert.hf_dense
            weights.update(read(get, f"transformer/layer_{i}/{native}", f"encoder.layer.{i}.{module}"))
    return weights


def _preprocessor(vocab_file: str, lower_case: bool, seq_length: int):
    return WordPiecePreprocessor(vocab_file, lower_case, seq_length, SPECIAL)


FAMILY = Family(
    name="MPNet",
    model_types=("mpnet",),
    tokenizer_files=("vocab.txt",),
    read_config=read_config,
    map_weights=map_weights,
    preprocessor=_preprocessor,
    weight_prefixes=("mpnet",),
    **bert.NETWORK,
)
