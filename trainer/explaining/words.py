"""Word pieces back to words: each tokenizer family marks word boundaries its own way.

    WordPiece       "##" continues a word ("play", "##ing")
    byte-level BPE  "Ġ" (a space byte in GPT-2's byte alphabet) starts one ("Ġplay", "ing");
                    pieces are spelt in that alphabet, so a word's bytes decode only joined
    SentencePiece   "▁" starts one ("▁play", "ing"); "<0xE2>" pieces are bytes

At export each vocabulary entry becomes (its bytes without the marker, starts a word), saved
in the model (`piece_table`), so merging (`merge`) is the same code for every family. A piece
after a special token always starts a word (a byte-level text's first word has no "Ġ").

Merged words are spelt as the tokenizer reads them: an uncased WordPiece vocabulary's
lower-cased, accents stripped, punctuation split off ("bank", "'", "s"). `in_texts` lays them
back onto the texts themselves, for a reader ("Bank's").
"""

import dataclasses
import difflib
import re
import unicodedata
from collections.abc import Sequence

import numpy as np

WORDPIECE, BYTE_PAIR, SENTENCEPIECE = "wordpiece", "byte-pair", "sentencepiece"
_SENTENCEPIECE_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _byte_decoder() -> dict:
    from trainer.modeling.encoders.tokenizers.byte_pair import bytes_to_unicode

    return {char: byte for byte, char in bytes_to_unicode().items()}


def piece(token: str, kind: str, decoder: dict | None = None) -> tuple[bytes, bool]:
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


def piece_table(tokens: Sequence[str], kind: str) -> tuple[list[bytes], list[bool]]:
    """`piece` of every vocabulary entry, in id order."""
    decoder = _byte_decoder() if kind == BYTE_PAIR else None
    pieces = [piece(token, kind, decoder) for token in tokens]
    return [text for text, _ in pieces], [starts for _, starts in pieces]


def vocabulary(preprocessor) -> tuple[list[str], str] | None:
    """(the tokens by id, the tokenizer kind) of a native preprocessor; None for a TF-Hub one,
    whose vocabulary the export does not read."""
    from trainer.modeling.encoders import preprocessing
    from trainer.modeling.encoders.tokenizers import word_piece
    from trainer.modeling.encoders.tokenizers.byte_pair import BytePairTokenizer

    if isinstance(preprocessor, word_piece.WordPiecePreprocessor):
        return word_piece.check_vocab(preprocessor.vocab_file, preprocessor.special), WORDPIECE
    if not isinstance(preprocessor, preprocessing.SubwordPreprocessor):
        return None
    tokenizer = preprocessor.tokenizer
    # The tokenizers keep token -> id only (what tokenizing needs); the inverse is built here.
    ids = tokenizer.token_ids()
    kind = BYTE_PAIR if isinstance(tokenizer, BytePairTokenizer) else SENTENCEPIECE
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


def merge(
    pieces: Sequence[bytes], starts: Sequence[bool], content: Sequence[bool], attributions: Sequence[float]
) -> list[Word]:
    """The words of one row, in order: pieces joined where they continue a word, their
    attributions summed. Tokens that are not `content` (special tokens, padding) are left out;
    the words after a run of them belong to the next segment (a pair's second text)."""
    words, segment, after_special = [], -1, True
    raw: list[bytearray] = []
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


def in_texts(words: Sequence[Word], texts: Sequence[str]) -> list[Word]:
    """`words` (merge's) as the words of `texts` themselves (the text and a pair's second text:
    segments 0 and 1): each run of non-space characters of a text, in its own case and
    punctuation, weighs the sum of the merged words laid on it, so the weights still add up.
    A text's words past what the model read (a truncated text's end) are left out, as its
    merged words leave them out."""
    return [
        word
        for segment, text in enumerate(texts)
        for word in _in_text([w for w in words if w.segment == segment], text, segment)
    ]


def _in_text(words: Sequence[Word], text: str, segment: int) -> list[Word]:
    """The merged words are aligned with the text character by character, both case-folded
    and stripped of accents and spaces (difflib); a word the text does not spell ("[UNK]")
    takes the text's characters in its place."""
    spans = [match.span() for match in re.finditer(r"\S+", text)]
    folded, where = _folded(text)
    pieces = [_folded(word.text)[0] for word in words]
    joined = "".join(pieces)
    if not folded or not joined:
        return list(words)
    at = np.zeros(len(joined), np.int64)  # each merged character's character of `folded`
    matcher = difflib.SequenceMatcher(None, joined, folded, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():  # "insert": the text's alone
        if tag in ("equal", "replace"):  # the text's characters in their place, spread evenly
            at[i1:i2] = j1 + np.arange(i2 - i1) * (j2 - j1) // (i2 - i1)
        elif tag == "delete":  # characters the text does not have: with its next one
            at[i1:i2] = min(j1, len(folded) - 1)
    word_of = np.searchsorted([end for _, end in spans], np.asarray(where)[at], side="right")
    firsts = np.cumsum([0] + [len(p) for p in pieces[:-1]])
    # A merged word of no characters (a lone space piece) goes with the word before it.
    owner = np.maximum.accumulate([word_of[first] if piece else 0 for first, piece in zip(firsts, pieces)])
    weights = np.zeros(len(spans))
    np.add.at(weights, owner, [word.weight for word in words])
    return [
        Word(text[start:end], float(weights[k]), segment)
        for k, (start, end) in enumerate(spans)
        if owner[0] <= k <= owner[-1]
    ]


def _folded(text: str) -> tuple[str, list[int]]:
    """`text` case-folded, without accents (NFKD's combining marks) or spaces, and the index
    in `text` of each of its characters."""
    chars, where = [], []
    for i, char in enumerate(text):
        for c in unicodedata.normalize("NFKD", char.casefold()):
            if not c.isspace() and not unicodedata.combining(c):
                chars.append(c)
                where.append(i)
    return "".join(chars), where


def top_words(words: Sequence[Word], k: int) -> list[Word]:
    """The `k` words of largest attribution (by absolute value), largest first."""
    order = np.argsort([-abs(word.weight) for word in words], kind="stable")
    return [words[i] for i in order[:k]]
