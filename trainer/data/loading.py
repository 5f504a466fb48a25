"""A run's splits, read by the reader of its task's unit (Task.unit): texts from CSV, TSV or JSON
Lines columns (splits.py), or tagged sentences (tagged_splits.py)."""

from trainer.config import Config


def load_datasets(config: Config, task):
    """Every split the config names, read, checked and carved for `task`."""
    from trainer.data import splits, tagged_splits

    reader = tagged_splits.load if task.unit == "word" else splits.load_datasets
    return reader(config, task)
