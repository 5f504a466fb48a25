"""The tokenizer an ONNX copy carries (issue #66): tokenizer.json, read by Hugging Face's
`tokenizers` library, and packing.json, read by packing.py, written at export from the run's
preprocessor, so that outside TensorFlow they give the features of the SavedModel's `tokenize`.

tokenizer.json is the tokenizer alone (no special tokens, post-processor, truncation or
padding); packing.json holds what packing.py adds: the family's special token ids and layout,
--max-seq-length, --long-texts and its window flags, and whether the model reads pairs. Each
tokenizer.json is what the package's own tokenizer is proven equal to (docs/encoders.md):

- WordPiece (BERT, ELECTRA, DistilBERT, MPNet): built with `tokenizers` from vocab.txt as
  BertTokenizerFast builds it (BertNormalizer, lower-casing and stripping accents when the
  preprocessor does; BertPreTokenizer; WordPiece, 100 characters a word) but with no added
  tokens: the package's WordPiece reads a "[CLS]" written in a text as "[", "cl", ... too.
- byte-level BPE (RoBERTa's vocab.json + merges.txt, ModernBERT's tokenizer.json): built from
  the spec the package's tokenizer reads from the same files (byte_pair.spec_from_*): its
  vocabulary, merges, normal forms, ByteLevel settings and added tokens with their ids.
- SentencePiece (XLM-RoBERTa, DeBERTa-v3): transformers' conversion of the model file
  (XLMRobertaTokenizerFast / DebertaV2TokenizerFast), which the package's SentencePiece
  tokenizer is tested against; transformers and sentencepiece are needed at export only.

Imports TensorFlow only through the preprocessor's own modules, inside `files`.
"""

import importlib
import json
import os
import shutil
import tempfile

from trainer import storage
from trainer.errors import UserError
from trainer.serving.onnx.packing import FORMAT, PACKING, TOKENIZER

# What each conversion needs (the setup.py test extra pins the versions it was checked with).
# transformers 5.25.0 normalizes a DeBERTa-v3 model file by its own map, as the package's
# tokenizer does (tokenizers/sentencepiece.py, METASPACE); older ones convert it otherwise.
_TRANSFORMERS_SINCE = "5.25.0"
_PACKAGES = {
    "tokenizers": "tokenizers>=0.22",
    "transformers": "transformers>=5.25,<6",
    "sentencepiece": "sentencepiece>=0.2,<0.2.3",
}


def files(preprocessor, long_texts, pair: bool) -> dict[str, bytes]:
    """{"tokenizer.json": bytes, "packing.json": bytes} of the run's native preprocessor
    (trainer.modeling.encoders: WordPiece, byte-level BPE or SentencePiece), its --long-texts
    (an input_pipeline.LongTexts) and whether it reads pairs; a UserError for a preprocessor
    with no tokenizer.json (a TF-Hub one) or when a package the conversion needs is missing."""
    return {
        TOKENIZER: tokenizer_json(preprocessor).encode("utf-8"),
        PACKING: json.dumps(packing_settings(preprocessor, long_texts, pair), indent=1, ensure_ascii=False).encode(
            "utf-8"
        ),
    }


def packing_settings(preprocessor, long_texts, pair: bool) -> dict:
    """packing.json: the ids of the family's start, end, padding and pair-separator tokens
    (preprocessing.SpecialTokens, which names them too), --max-seq-length, --long-texts."""
    special, ids = preprocessor.special, preprocessor.special_ids
    return {
        "format": FORMAT,
        "max_seq_length": int(preprocessor.seq_length),
        "pair": bool(pair),
        "long_texts": {
            "mode": long_texts.mode,
            "window_overlap": int(long_texts.window_overlap),
            "max_windows": int(long_texts.max_windows),
        },
        "special_ids": {
            "start": ids[special.start],
            "end": ids[special.end],
            "pad": ids[special.pad],
            "pair_separator": [ids[token] for token in special.pair_separator],
        },
        "special_tokens": {
            "start": special.start,
            "end": special.end,
            "pad": special.pad,
            "pair_separator": list(special.pair_separator),
        },
        "typed_pairs": bool(special.typed_pairs),
    }


def tokenizer_json(preprocessor) -> str:
    """tokenizer.json of the preprocessor's tokenizer, without post-processor, truncation or
    padding, checked by loading it with `tokenizers`."""
    from trainer.modeling.encoders.tokenizers import byte_pair, sentencepiece, word_piece

    tokenizers = _require("tokenizers")
    tokenizer = getattr(preprocessor, "tokenizer", None)
    if isinstance(preprocessor, word_piece.WordPiecePreprocessor):
        config = json.loads(_word_piece(preprocessor, tokenizers).to_str())
    elif isinstance(tokenizer, byte_pair.BytePairTokenizer):
        config = _byte_pair(_byte_pair_spec(tokenizer))
    elif isinstance(tokenizer, sentencepiece.SentencePieceTokenizer):
        config = _sentencepiece(preprocessor)
    else:
        raise UserError(
            f"no tokenizer.json for a {type(preprocessor).__name__} (only the native "
            "backend's WordPiece, byte-level BPE and SentencePiece tokenizers convert)"
        )
    config.update(post_processor=None, truncation=None, padding=None)
    return tokenizers.Tokenizer.from_str(json.dumps(config)).to_str()


def _require(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        raise UserError(
            f"the ONNX copy's tokenizer.json needs the {name} package, which this "
            f"Python does not have: pip install '{_PACKAGES[name]}'"
        ) from None


def _word_piece(preprocessor, tokenizers):
    """BertTokenizerFast's normalizer, pre-tokenizer and model over the preprocessor's vocab."""
    from trainer.modeling.encoders.tokenizers import word_piece

    vocab = word_piece.check_vocab(preprocessor.vocab_file, preprocessor.special)
    lower_case = bool(preprocessor.lower_case)
    tokenizer = tokenizers.Tokenizer(
        tokenizers.models.WordPiece(
            {token: i for i, token in enumerate(vocab)},
            unk_token=preprocessor.special.unknown,
            max_input_chars_per_word=100,
        )
    )
    tokenizer.normalizer = tokenizers.normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=lower_case, lowercase=lower_case
    )
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = tokenizers.decoders.WordPiece()
    return tokenizer


def _byte_pair_spec(tokenizer):
    """The spec the tokenizer was built from, read again from its source files (its assets):
    ModernBERT's tokenizer.json, or RoBERTa's vocab.json + merges.txt with the family's added
    tokens."""
    from trainer.modeling.encoders.models import roberta
    from trainer.modeling.encoders.tokenizers import byte_pair

    paths = [asset.asset_path.numpy().decode("utf-8") for asset in tokenizer.assets]
    if len(paths) == 1:
        return byte_pair.spec_from_tokenizer_json(paths[0])
    return byte_pair.spec_from_vocab_and_merges(*paths, roberta.ADDED_TOKENS)


def _byte_pair(spec) -> dict:
    """tokenizer.json of a byte_pair.BytePairSpec: its ids (added tokens' included) as they are."""
    forms = [{"type": form} for form in spec.normalizers]
    normalizer = None if not forms else forms[0] if len(forms) == 1 else {"type": "Sequence", "normalizers": forms}
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": spec.add_prefix_space,
        "trim_offsets": True,
        "use_regex": spec.use_regex,
    }
    return {
        "version": "1.0",
        "added_tokens": [
            {
                "id": token.id,
                "content": token.content,
                "single_word": False,
                "lstrip": token.lstrip,
                "rstrip": token.rstrip,
                "normalized": token.normalized,
                "special": True,
            }
            for token in spec.added_tokens
        ],
        "normalizer": normalizer,
        "pre_tokenizer": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": spec.unk_token,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": spec.vocab,
            "merges": [list(pair) for pair in spec.merges],
        },
    }


def _sentencepiece(preprocessor) -> dict:
    """transformers' conversion of the model file alone (copied into an empty directory, so no
    tokenizer.json or settings beside it have a say), by the family's fast tokenizer class."""
    from trainer.modeling.encoders.models import deberta_v2, roberta

    classes = {
        roberta.SPECIAL: ("XLMRobertaTokenizerFast", "sentencepiece.bpe.model"),
        deberta_v2.SPECIAL: ("DebertaV2TokenizerFast", "spm.model"),
    }
    if preprocessor.special not in classes:
        raise UserError(
            f"no tokenizer.json for a SentencePiece model packed as "
            f"{preprocessor.special} (XLM-RoBERTa's and DeBERTa-v3's convert)"
        )
    class_name, filename = classes[preprocessor.special]
    _require("sentencepiece")  # transformers reads the model file with it
    transformers = _require("transformers")
    from packaging.version import Version  # a dependency of transformers

    if Version(transformers.__version__) < Version(_TRANSFORMERS_SINCE):
        raise UserError(
            f"the ONNX copy's tokenizer.json is transformers' conversion of the model file, which "
            f"the package's tokenizer equals from transformers {_TRANSFORMERS_SINCE}; this Python has "
            f"{transformers.__version__}: pip install '{_PACKAGES['transformers']}'"
        )
    source = preprocessor.tokenizer.model_asset.asset_path.numpy().decode("utf-8")
    directory = tempfile.mkdtemp(prefix="vbt-sentencepiece-")
    try:
        with open(os.path.join(directory, filename), "wb") as f:
            f.write(storage.read_bytes(source))
        converted = getattr(transformers, class_name).from_pretrained(directory)
        return json.loads(converted.backend_tokenizer.to_str())
    finally:
        shutil.rmtree(directory, ignore_errors=True)
