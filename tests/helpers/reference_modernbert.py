"""ModernBERT's tiny fixture for tests/modeling/encoders/test_encoder_families.py: a byte-level BPE tokenizer.json
laid out as answerdotai/ModernBERT-base's (NFC, ByteLevel, specials after the merges, an lstrip
[MASK], the `[CLS] $A [SEP] $B [SEP]` template), and a config whose window (+-4 tokens) is
shorter than the test texts, with global and local layers and a vocabulary padded past the
tokenizer's, as the published one is (50,368 rows for 50,285 tokens)."""

import functools
import json
import os

VOCAB_SIZE = 320
TEXTS = [
    "i love this movie !",
    "the movie was not good , so bad",
    "meh",
    "i hate it , awful",
    "it is a movie , a very very great movie , i love it so .",
    "this movie is great",
    "it was awful , very awful ?",
    "fine , ok , good",
] * 4


@functools.cache
def _tokenizer():
    """Trained once per process: tiny_config needs the special tokens' ids it assigns."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(
        TEXTS,
        trainers.BpeTrainer(vocab_size=300, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    tokenizer.add_special_tokens(
        ["[UNK]", "[CLS]", "[SEP]", "[PAD]", AddedToken("[MASK]", lstrip=True, normalized=False)]
    )
    ids = {token: tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]")}
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", special_tokens=list(ids.items())
    )
    assert tokenizer.get_vocab_size() <= VOCAB_SIZE
    return tokenizer


def tiny_config():
    import transformers

    tokenizer = _tokenizer()
    return transformers.ModernBertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=48,
        global_attn_every_n_layers=2,
        local_attention=8,
        pad_token_id=tokenizer.token_to_id("[PAD]"),
        cls_token_id=tokenizer.token_to_id("[CLS]"),
        bos_token_id=tokenizer.token_to_id("[CLS]"),
        sep_token_id=tokenizer.token_to_id("[SEP]"),
        eos_token_id=tokenizer.token_to_id("[SEP]"),
        initializer_range=0.2,
    )


def write_tokenizer(directory: str):
    _tokenizer().save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "cls_token": "[CLS]",
                "sep_token": "[SEP]",
                "pad_token": "[PAD]",
                "unk_token": "[UNK]",
                "mask_token": "[MASK]",
                "model_input_names": ["input_ids", "attention_mask"],
                "model_max_length": 8192,
            },
            f,
        )
