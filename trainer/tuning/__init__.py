"""Hyperparameter search: the search space both searches read (space.py), and the local search of
`python -m trainer.tune` (search.py, trials.py, summary.py)."""
