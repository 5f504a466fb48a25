"""XLM-RoBERTa's tiny fixture for tests/modeling/encoders/test_encoder_families.py: a unigram SentencePiece model
(sentencepiece.bpe.model, <unk> <s> </s> first, as XLM-R's), trained with sentencepiece."""

import os

import reference_roberta

# Pieces in the model, plus fairseq's <pad> and <mask> (XLMRobertaTokenizer adds both).
PIECES = 120


def _train(directory: str):
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(reference_roberta.CORPUS + ["ünïcödé 東京 wörds ok"] * 3),
        model_prefix=os.path.join(directory, "m"),
        model_type="unigram",
        vocab_size=PIECES,
        hard_vocab_limit=False,
        character_coverage=1.0,
        minloglevel=2,
    )
    os.replace(os.path.join(directory, "m.model"), os.path.join(directory, "sentencepiece.bpe.model"))


def tiny_config():
    import tempfile

    import sentencepiece
    import transformers

    with tempfile.TemporaryDirectory() as scratch:
        _train(scratch)
        pieces = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(scratch, "sentencepiece.bpe.model")
        ).get_piece_size()
    return transformers.XLMRobertaConfig(
        vocab_size=pieces + 2,
        max_position_embeddings=66,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        type_vocab_size=1,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        initializer_range=0.2,
        layer_norm_eps=1e-5,
    )


def write_tokenizer(directory: str):
    _train(directory)
