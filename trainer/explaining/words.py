"""Word pieces back to words: each tokenizer family marks word boundaries its own way.

    WordPiece       "##" continues a word ("play", "##ing")
    byte-level BPE  "Ġ" (a space byte in GPT-2's byte alphabet) starts one ("Ġplay", "ing");
                    pieces are spelt in that alphabet, so a word's bytes decode only joined
    SentencePiece   "▁" starts one ("▁play", "ing"); "<0xE2>" pieces are bytes

At export each vocabulary entry becomes (its bytes without the marker, starts a word), saved
in the model (`piece_table`), so merging (`merge`) is the same code for every family. A piece
after a special token always starts a word (a byte-level text's first word has no "Ġ").
"""
import dataclasses
import json
import re
from typing import List, Optional, Sequence, Tuple

import numpy as np

WORDPIECE, BYTE_PAIR, SENTENCEPIECE = "wordpiece", "byte-pair", "sentencepiece"
_SENTENCEPIECE_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _byte_decoder() -> dict:
    from trainer.modeling.encoders.tokenizers.byte_pair import bytes_to_unicode

    return {char: byte for byte, char in bytes_to_unicode().items()}


def piece(token: str, kind: str, decoder: Optional[dict] = None) -> Tuple[bytes, bool]:
    """(the bytes a vocabulary entry stands for in the text, whether it starts a word)."""
    if kind == WORDPIECE:
        return (token[2:].encode(), False) if token.startswith("##") else (token.encode(), True)
    if kind == BYTE_PAIR:
        decoder = decoder or _byte_decoder()
        if not all(char in decoder for char in token):  # an added token, spelt as itself
            return token.encode(), True
        raw = bytes(decoder[char] for char in token)
        return (raw[1:], True) if raw.startswith(b" ") else (raw, False)
    if kind == SENTENCEPIECE:
        byte = _SENTENCEPIECE_BYTE.fullmatch(token)
        if byte:
            return bytes([int(byte.group(1), 16)]), False
        return (token[1:].encode(), True) if token.startswith("▁") else (token.encode(), False)
    raise ValueError(f"unknown tokenizer kind {kind!r}")


def piece_table(tokens: Sequence[str], kind: str) -> Tuple[List[bytes], List[bool]]:
    """`piece` of every vocabulary entry, in id order."""
    decoder = _byte_decoder() if kind == BYTE_PAIR else None
    pieces = [piece(token, kind, decoder) for token in tokens]
    return [text for text, _ in pieces], [starts for _, starts in pieces]


def vocabulary(preprocessor) -> Optional[Tuple[List[str], str]]:
    """(the tokens by id, the tokenizer kind) of a native preprocessor; None for a TF-Hub one,
    whose vocabulary the export does not read."""
    from trainer.modeling.encoders import preprocessing
    from trainer.modeling.encoders.tokenizers.byte_pair import BytePairTokenizer

    if isinstance(preprocessor, preprocessing.BertPreprocessor):
        return preprocessing.check_vocab(preprocessor.vocab_file, preprocessor.special), WORDPIECE
    if not isinstance(preprocessor, preprocessing.SubwordPreprocessor):
        return None
    tokenizer = preprocessor.tokenizer
    # The tokenizers keep token -> id only (what tokenizing needs); the inverse is built here.
    if isinstance(tokenizer, BytePairTokenizer):
        ids, kind = json.loads(tokenizer._ids), BYTE_PAIR
    else:
        ids, kind = tokenizer._vocab, SENTENCEPIECE
    tokens = [""] * tokenizer.vocab_size
    for token, index in ids.items():
        if not tokens[index]:
            tokens[index] = token
    return tokens, kind


@dataclasses.dataclass
class Word:
    text: str
    weight: float  # the sum of its pieces' attributions
    segment: int  # 0: the text; 1: a pair's second text


def merge(pieces: Sequence[bytes], starts: Sequence[bool], content: Sequence[bool],
          attributions: Sequence[float]) -> List[Word]:
    """The words of one row, in order: pieces joined where they continue a word, their
    attributions summed. Tokens that are not `content` (special tokens, padding) are left out;
    the words after a run of them belong to the next segment (a pair's second text)."""
    words, segment, after_special = [], -1, True
    raw: List[bytearray] = []
    for text, start, is_content, weight in zip(pieces, starts, content, attributions):
        if not is_content:
            after_special = True
            continue
        if after_special:
            segment += 1
        if start or after_special:
            words.append(Word("", 0.0, segment))
            raw.append(bytearray())
        raw[-1] += text
        words[-1].weight += float(weight)
        after_special = False
    for word, text in zip(words, raw):
        word.text = text.decode("utf-8", errors="replace")
    return words


def top_words(words: Sequence[Word], k: int) -> List[Word]:
    """The `k` words of largest attribution (by absolute value), largest first."""
    order = np.argsort([-abs(word.weight) for word in words], kind="stable")
    return [words[i] for i in order[:k]]
