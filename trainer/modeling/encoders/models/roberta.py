"""RoBERTa (base, large) and XLM-RoBERTa: BERT's network with fairseq's positions (counted from
the padding id + 1), one token type, and LayerNorm epsilon 1e-5; the two differ only in their
tokenizer: byte-level BPE (vocab.json + merges.txt) for RoBERTa, SentencePiece
(sentencepiece.bpe.model, with fairseq's id offset) for XLM-R. Both pack `<s> a </s></s> b </s>`.

Read against Hugging Face's modeling_roberta.py / modeling_xlm_roberta.py: RobertaEmbeddings
(create_position_ids_from_input_ids) and BERT's layers and pooler under the same names.
"""
import os

from trainer.modeling.encoders.models import Family, bert
from trainer.modeling.encoders.preprocessing import SpecialTokens, SubwordPreprocessor

SPECIAL = SpecialTokens("<pad>", "<unk>", "<s>", "</s>", ("</s>",), typed_pairs=False)


def read_config(raw: dict, path: str):
    return bert.read_config(raw, path, position_padding_id=raw.get("pad_token_id", 1))


def _byte_pair_preprocessor(vocab_file: str, lower_case: bool, seq_length: int):
    from trainer.modeling.encoders.tokenizers.byte_pair import BytePairTokenizer

    merges = os.path.join(os.path.dirname(vocab_file), "merges.txt")
    return SubwordPreprocessor(BytePairTokenizer.from_vocab_and_merges(vocab_file, merges),
                               SPECIAL, seq_length)


def _sentencepiece_preprocessor(model_file: str, lower_case: bool, seq_length: int):
    from trainer.modeling.encoders.tokenizers.sentencepiece import SentencePieceTokenizer

    return SubwordPreprocessor(SentencePieceTokenizer(model_file, "xlm-roberta"), SPECIAL, seq_length)


ROBERTA = Family(name="RoBERTa", model_types=("roberta",),
                 tokenizer_files=("vocab.json", "merges.txt"), read_config=read_config,
                 map_weights=bert.map_weights, preprocessor=_byte_pair_preprocessor,
                 weight_prefixes=("roberta",), **bert.NETWORK)
XLM_ROBERTA = Family(name="XLM-RoBERTa", model_types=("xlm-roberta",),
                     tokenizer_files=("sentencepiece.bpe.model",), read_config=read_config,
                     map_weights=bert.map_weights, preprocessor=_sentencepiece_preprocessor,
                     weight_prefixes=("roberta",), **bert.NETWORK)
