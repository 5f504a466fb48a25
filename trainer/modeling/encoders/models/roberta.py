"""RoBERTa (base, large) and XLM-RoBERTa: BERT's network with fairseq's positions (counted from
the padding id + 1), one token type, and LayerNorm epsilon 1e-5; the two differ only in their
tokenizer: byte-level BPE (vocab.json + merges.txt) for RoBERTa, SentencePiece
(sentencepiece.bpe.model, with fairseq's id offset) for XLM-R. Both pack `<s> a </s></s> b </s>`.

Read against Hugging Face's modeling_roberta.py / modeling_xlm_roberta.py: RobertaEmbeddings
(create_position_ids_from_input_ids) and BERT's layers and pooler under the same names.
"""

import os

import numpy as np

from trainer.modeling.encoders.models import Family, bert
from trainer.modeling.encoders.preprocessing import SpecialTokens, SubwordPreprocessor
from trainer.modeling.encoders.tokenizers.byte_pair import BytePairTokenizer
from trainer.modeling.encoders.tokenizers.sentencepiece import (
    MODEL_NORMALIZER,
    SentencePieceLayout,
    SentencePieceTokenizer,
)

SPECIAL = SpecialTokens("<pad>", "<unk>", "<s>", "</s>", ("</s>",), typed_pairs=False)
# Both tokenizers' special tokens, in id order, matched in raw text (RobertaTokenizerFast(vocab_file,
# merges_file) adds them to a vocab.json, transformers 5).
ADDED_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


def _fairseq_vocabulary(pieces: list):
    """XLM-R's ids are fairseq's (transformers' XLMRobertaConverter.convert_from_spm): <s>=0,
    <pad>=1, </s>=2, <unk>=3, every other piece its SentencePiece id + 1, <mask> the last."""
    tokens = ["<s>", "<pad>", "</s>", "<unk>", *pieces[3:], "<mask>"]
    return tokens, np.array([3, 0, 2, *range(4, len(pieces) + 1)], np.int32)


# XLM-R's sentencepiece.bpe.model: <unk>, <s>, </s> first; Hugging Face keeps its normalizer.
SENTENCEPIECE = SentencePieceLayout(
    family="xlm-roberta",
    specials=ADDED_TOKENS,
    leading_pieces=("<unk>", "<s>", "</s>"),
    vocabulary=_fairseq_vocabulary,
    normalizer=MODEL_NORMALIZER,
)


def read_config(raw: dict, path: str):
    return bert.read_config(raw, path, position_padding_id=raw.get("pad_token_id", 1))


def _byte_pair_preprocessor(vocab_file: str, lower_case: bool, seq_length: int):
    merges = os.path.join(os.path.dirname(vocab_file), "merges.txt")
    return SubwordPreprocessor(
        BytePairTokenizer.from_vocab_and_merges(vocab_file, merges, ADDED_TOKENS), SPECIAL, seq_length
    )


def _sentencepiece_preprocessor(model_file: str, lower_case: bool, seq_length: int):
    return SubwordPreprocessor(SentencePieceTokenizer(model_file, SENTENCEPIECE), SPECIAL, seq_length)


ROBERTA = Family(
    name="RoBERTa",
    model_types=("roberta",),
    tokenizer_files=("vocab.json", "merges.txt"),
    read_config=read_config,
    map_weights=bert.map_weights,
    preprocessor=_byte_pair_preprocessor,
    weight_prefixes=("roberta",),
    **bert.NETWORK,
)
XLM_ROBERTA = Family(
    name="XLM-RoBERTa",
    model_types=("xlm-roberta",),
    tokenizer_files=("sentencepiece.bpe.model",),
    read_config=read_config,
    map_weights=bert.map_weights,
    preprocessor=_sentencepiece_preprocessor,
    weight_prefixes=("roberta",),
    **bert.NETWORK,
)
