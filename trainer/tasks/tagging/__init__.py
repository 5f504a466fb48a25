"""Token classification (issue #52), landing a module at a time: the IOB2 rules (`tags.py`) and
the entity scores (`metrics.py`) come first; the task object joins the registry with the
alignment of words to a family's pieces, its head and its export."""
