"""RoBERTa's tiny fixture for tests/modeling/encoders/test_encoder_families.py: a byte-level BPE vocabulary
(vocab.json + merges.txt) trained with the tokenizers library, RoBERTa's special tokens first."""

import conftest

# The tiny tasks' sentences (tests/conftest.py), with a few that exercise byte-level BPE.
CORPUS = [
    *conftest.POSITIVE,
    *conftest.NEGATIVE,
    *conftest.NEUTRAL,
    "The café's naïve résumé!",
    "I love it 😀",
    "it was fine , i think",
] * 3


def _tokenizer_files(directory: str):
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(
        CORPUS,
        vocab_size=320,
        min_frequency=2,
        show_progress=False,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    tokenizer.save_model(directory)
    return tokenizer.get_vocab_size()


def tiny_config():
    import tempfile

    import transformers

    with tempfile.TemporaryDirectory() as scratch:
        vocab_size = _tokenizer_files(scratch)
    return transformers.RobertaConfig(
        vocab_size=vocab_size,
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
    _tokenizer_files(directory)
