"""The preprocessor of the SentencePiece families: the in-graph SentencePiece tokenizer
(tokenizers/sentencepiece.py) behind the TF-Hub preprocessor interface BertPreprocessor offers
(`tokenize`, `bert_pack_inputs`, `__call__`), packed by the shared `pack_segments`.
"""
from typing import Dict, List, Optional

import tensorflow as tf
import tf_keras

from trainer.modeling.encoders.preprocessing import BERT_WORDPIECE, SpecialTokens, pack_segments
from trainer.modeling.encoders.tokenizers.sentencepiece import SentencePieceTokenizer

# Per tokenizer family (tokenizers.sentencepiece.FAMILIES): how it packs one or two texts.
# DeBERTa-v3 packs as BERT does, `[CLS] a [SEP] b [SEP]` with b's type ids 1
# (DebertaV2TokenizerFast's template).
LAYOUTS: Dict[str, SpecialTokens] = {"deberta-v3": BERT_WORDPIECE}


class SentencePiecePreprocessor(tf_keras.layers.Layer):
    """tf.string [B] -> int32 [B, seq_length] input_word_ids / input_mask / input_type_ids,
    equal to Hugging Face's fast tokenizer's `input_ids`, `attention_mask`, `token_type_ids`
    with truncation="longest_first" and padding="max_length"."""

    def __init__(self, model_file: str, family: str, seq_length: int = 128, **kwargs):
        kwargs["trainable"] = False  # nothing to train; also when rebuilt from get_config
        super().__init__(**kwargs)
        self.model_file = model_file
        self.family = family
        self.seq_length = seq_length
        self.special = LAYOUTS[family]
        self.tokenizer = SentencePieceTokenizer(model_file, family)
        self.vocab_size = self.tokenizer.vocab_size
        self.special_ids = {token: self.tokenizer.token_to_id(token) for token in
                            (*self.special.names(), *self.special.pair_separator)}
        # Exports ship the model file in assets/, as BertPreprocessor ships vocab.txt.
        self.vocab_asset = self.tokenizer.model_asset

    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """[B] strings -> int32 RaggedTensor [B, (tokens)], no special tokens added."""
        return self.tokenizer.tokenize(strings)

    def bert_pack_inputs(self, segments: List[tf.RaggedTensor],
                         seq_length: Optional[int] = None) -> Dict[str, tf.Tensor]:
        seq_length = self.seq_length if seq_length is None else seq_length
        return pack_segments(segments, seq_length, self.special_ids, self.special)

    def call(self, strings):
        return self.bert_pack_inputs([self.tokenize(strings)])

    def get_config(self):
        return {**super().get_config(), "model_file": self.model_file, "family": self.family,
                "seq_length": self.seq_length}
