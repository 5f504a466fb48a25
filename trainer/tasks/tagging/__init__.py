"""Token classification (issue #52), landing a module at a time: the IOB2 rules (`tags.py`),
the entity scores (`metrics.py`) and the entities of predicted tags in the graph (`spans.py`)
come first; the task object joins the registry with its head, its input pipeline and its export.
"""
