"""Every relative link of README.md and docs/*.md reaches a file of the repository, and every
`#anchor` a heading of the page it points to: a page renamed, moved or retitled shows here."""

import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\]\(([^()\s]+)\)")


def prose(page: pathlib.Path) -> str:
    """The page without its fenced blocks, whose brackets are code, not links."""
    return FENCED.sub("", page.read_text(encoding="utf-8"))


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces -> '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: pathlib.Path) -> set:
    return {anchor(heading) for heading in re.findall(r"^#+ (.*)$", prose(page), re.M)}


def relative_links(page: pathlib.Path) -> list:
    """(target file, anchor or '') of each link that is not a URL."""
    targets = [target for target in LINK.findall(prose(page)) if not re.match(r"[a-z]+:", target)]
    return [
        (page if not path else (page.parent / path).resolve(), fragment)
        for path, _, fragment in (target.partition("#") for target in targets)
    ]


def test_a_headings_anchor_is_githubs():
    assert anchor("The job dir: finished, unfinished, in use") == "the-job-dir-finished-unfinished-in-use"
    assert anchor("9. Spot and flex-start jobs") == "9-spot-and-flex-start-jobs"
    assert anchor("A larger encoder: all-mpnet-base-v2") == "a-larger-encoder-all-mpnet-base-v2"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_reaches_a_file(page):
    missing = [os.path.relpath(target, ROOT) for target, _ in relative_links(page) if not target.exists()]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_anchor_names_a_heading_of_its_page(page):
    missing = [
        f"{target.name}#{fragment}"
        for target, fragment in relative_links(page)
        if fragment and target.suffix == ".md" and target.exists() and fragment not in anchors(target)
    ]
    assert missing == []
