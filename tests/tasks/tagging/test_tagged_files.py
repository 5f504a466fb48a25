"""Files of tagged sentences (trainer/tasks/tagging/files.py): CoNLL, JSON Lines of tokens and
tags, JSON Lines of text and character spans; each bad line named by file, line and token."""

import gzip
import json
import re

import pytest

from trainer.errors import UserError
from trainer.tasks.tagging import files as tagged_files


def write(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def jsonl(path, *records) -> str:
    return write(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def spans_of(sentence):
    """(text, tags) per word, to read a sentence at a glance."""
    return [(sentence.text[a:b], tag) for (a, b), tag in zip(sentence.words, sentence.tags)]


def test_a_conll_file_is_sentences_of_tokens_joined_by_spaces(tmp_path):
    path = write(tmp_path / "a.conll", "-DOCSTART-\tO\n\nSt.\tB-ORG\nLawrence\tI-ORG\n)\tO\n\n\nParis\tB-LOC\n")
    first, second = tagged_files.read(path, "--training-file").sentences
    assert first.text == "St. Lawrence )" and first.where == f"{path} line 3"
    assert spans_of(first) == [("St.", "B-ORG"), ("Lawrence", "I-ORG"), (")", "O")]
    assert spans_of(second) == [("Paris", "B-LOC")] and second.where == f"{path} line 8"


def test_conll_2003s_four_columns_give_the_last_as_the_tag(tmp_path):
    path = write(tmp_path / "a.iob", "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n")
    [sentence] = tagged_files.read(path, "--training-file").sentences
    assert spans_of(sentence) == [("EU", "B-ORG"), ("rejects", "O")]


def test_a_gzipped_conll_file_is_read(tmp_path):
    path = tmp_path / "a.conll.gz"
    path.write_bytes(gzip.compress(b"Oslo\tB-LOC\n"))
    assert tagged_files.is_tagged(str(path))
    assert tagged_files.read(str(path), "--training-file").types() == ["LOC"]


def test_a_token_without_a_tag_names_its_line_as_a_cell_is_named(tmp_path):
    """One format for every message of a word, the package's (`FILE line N, column 'C'`)."""
    path = write(tmp_path / "a.conll", "Oslo\tB-LOC\nis\n")
    with pytest.raises(UserError, match=r"a.conll line 2, token 'is': no tag"):
        tagged_files.read(path, "--training-file")


@pytest.mark.parametrize("tag", ["PER", "S-PER", "B_PER"])
def test_a_tag_outside_iob2_names_the_line_of_its_token(tmp_path, tag):
    """The token's own line (5), as an editor numbers it, not its sentence's first (3)."""
    path = write(tmp_path / "a.conll", f"Ada\tO\n\nI\tO\nmet\tO\nAda\t{tag}\n")
    with pytest.raises(UserError, match=rf"a.conll line 5, token 'Ada': tag '{tag}' is not IOB2"):
        tagged_files.read(path, "--training-file")


def test_a_tag_outside_iob2_in_json_lines_names_the_records_line(tmp_path):
    path = jsonl(
        tmp_path / "a.jsonl", {"tokens": ["a"], "tags": ["O"]}, {"tokens": ["Ada", "met"], "tags": ["O", "PER"]}
    )
    with pytest.raises(UserError, match=r"a.jsonl line 2, token 'met': tag 'PER' is not IOB2"):
        tagged_files.read(path, "--training-file")


def test_an_i_tag_starting_an_entity_is_read_as_b_and_counted(tmp_path):
    path = write(tmp_path / "a.conll", "Ada\tI-PER\nLovelace\tI-PER\nin\tO\nParis\tI-LOC\n")
    tagged = tagged_files.read(path, "--training-file")
    assert tagged.sentences[0].tags == ("B-PER", "I-PER", "O", "B-LOC")
    assert (tagged.repaired, tagged.first_repair) == (2, f"{path} line 1, token 'Ada'")


def test_a_repaired_tag_is_named_at_its_tokens_line(tmp_path):
    path = write(tmp_path / "a.conll", "Ada\tB-PER\nin\tO\nParis\tI-LOC\n")
    assert tagged_files.read(path, "--training-file").first_repair == f"{path} line 3, token 'Paris'"


def test_json_lines_of_tokens_and_tags(tmp_path):
    path = jsonl(tmp_path / "a.jsonl", {"tokens": ["Zoë", "flew"], "tags": ["B-PER", "O"]})
    [sentence] = tagged_files.read(path, "--training-file").sentences
    assert spans_of(sentence) == [("Zoë", "B-PER"), ("flew", "O")]


def test_a_token_and_tag_count_mismatch_names_its_line(tmp_path):
    path = jsonl(tmp_path / "a.jsonl", {"tokens": ["a"], "tags": ["O"]}, {"tokens": ["a", "b"], "tags": ["O"]})
    with pytest.raises(UserError, match=r"a.jsonl line 2: 2 tokens but 1 tags"):
        tagged_files.read(path, "--training-file")


def test_spans_keep_the_raw_text_and_cut_words_at_their_edges(tmp_path):
    text = "Café  Zoë's 🎉 in São Paulo"
    spans = [{"start": 6, "end": 9, "label": "PER"}, {"start": 17, "end": 26, "label": "LOC"}]
    path = jsonl(tmp_path / "a.jsonl", {"text": text, "spans": spans})
    [sentence] = tagged_files.read(path, "--training-file").sentences
    assert sentence.text == text
    assert spans_of(sentence) == [
        ("Café", "O"),
        ("Zoë", "B-PER"),
        ("'s", "O"),
        ("🎉", "O"),
        ("in", "O"),
        ("São", "B-LOC"),
        ("Paulo", "I-LOC"),
    ]


def test_a_span_out_of_range_names_its_line(tmp_path):
    path = jsonl(tmp_path / "a.jsonl", {"text": "Oslo", "spans": [{"start": 0, "end": 9, "label": "LOC"}]})
    with pytest.raises(UserError, match=r"a.jsonl line 1: span 'LOC' at 0-9 is out of range: the text has 4"):
        tagged_files.read(path, "--training-file")


@pytest.mark.parametrize("label, kind", [("B-PER", "PER"), ("I-LOC", "LOC")])
def test_a_span_labelled_with_an_iob_prefix_is_refused_suggesting_its_type(tmp_path, label, kind):
    """Issue 64, 8: "B-PER" became a type of its own, its words tagged B-B-PER."""
    spans = [{"start": 0, "end": 3, "label": "PER"}]
    path = jsonl(
        tmp_path / "a.jsonl",
        {"text": "Ada", "spans": spans},
        {"text": "Ada in Oslo", "spans": [{"start": 7, "end": 11, "label": label}]},
    )
    with pytest.raises(
        UserError,
        match=rf"^{re.escape(path)} line 2: span label '{label}' is an IOB tag; "
        rf"a span's label is its entity type \('{kind}'\)",
    ):
        tagged_files.read(path, "--training-file")


def test_overlapping_spans_name_both(tmp_path):
    spans = [{"start": 0, "end": 8, "label": "ORG"}, {"start": 5, "end": 12, "label": "LOC"}]
    path = jsonl(tmp_path / "a.jsonl", {"text": "Bank of Oslo", "spans": spans})
    with pytest.raises(UserError, match=r"a.jsonl line 1: spans 'ORG' and 'LOC' overlap at characters 5-8"):
        tagged_files.read(path, "--training-file")


def test_a_record_of_neither_layout_names_its_keys(tmp_path):
    path = jsonl(tmp_path / "a.jsonl", {"sentence": "Oslo"})
    with pytest.raises(UserError, match=r"a.jsonl line 1: a tagged sentence needs .* this one has \['sentence'\]"):
        tagged_files.read(path, "--training-file")


def test_a_csv_is_not_a_tagged_file(tmp_path):
    path = write(tmp_path / "a.csv", "text,label\nx,1\n")
    with pytest.raises(UserError, match=r"--training-file: .*a.csv is not a file of tagged sentences"):
        tagged_files.read(path, "--training-file")


@pytest.mark.parametrize("name", ["a.txt", "a.tsv", "a.txt.gz"])
def test_conll_shipped_as_txt_or_tsv_is_read_as_conll(tmp_path, name):
    """Issue 64, 5: CoNLL data is often .txt (WNUT-17's own files) or .tsv."""
    path = tmp_path / name
    path.write_bytes((gzip.compress if name.endswith(".gz") else bytes)(b"Ada\tB-PER\nran\tO\n"))
    [sentence] = tagged_files.read(str(path), "--training-file").sentences
    assert spans_of(sentence) == [("Ada", "B-PER"), ("ran", "O")]


def test_an_unknown_extension_lists_the_tagged_formats(tmp_path):
    path = write(tmp_path / "a.xls", "Ada\tB-PER\n")
    with pytest.raises(
        UserError,
        match=r"^--training-file: cannot tell the format of .*a.xls from its "
        r"extension '.xls'; tagged sentences are CoNLL \(.conll, .iob; "
        r".txt and .tsv read as CoNLL too\) or JSON Lines \(.jsonl, "
        r".ndjson, .json\) of tokens and tags, or of text and spans, "
        r"each optionally followed by .gz",
    ):
        tagged_files.read(path, "--training-file")


def test_byte_order_marks_inside_a_conll_file_are_dropped(tmp_path):
    path = write(tmp_path / "a.conll", "Dubbz\ufeff\tB-person\n!\tO\n\ufeff\t\ufeff\n\nok\tO\n")
    first, second = tagged_files.read(path, "--training-file").sentences
    assert spans_of(first) == [("Dubbz", "B-person"), ("!", "O")] and second.text == "ok"


def test_a_tag_of_a_type_training_never_tags_names_the_line_of_its_token(tmp_path):
    from trainer.data.labels import LabelSpec
    from trainer.tasks.tagging import splits as tagged_splits

    path = write(tmp_path / "dev.conll", "Ada\tB-PER\nin\tO\nOslo\tB-LOC\n")
    spec = LabelSpec("tags", ["O", "B-PER", "I-PER"])
    with pytest.raises(
        UserError,
        match=r"dev.conll line 3, token 'Oslo': tag 'B-LOC' names a type "
        r"the training file never tags \(B-PER\)",
    ):
        tagged_splits.tagged_split(tagged_files.read(path, "--validation-file"), path, spec)
