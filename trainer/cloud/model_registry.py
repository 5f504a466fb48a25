"""Model Registry versions and endpoint traffic: the rules trainer.deploy follows, as pure functions.

- A version alias is `[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]` (Model.version_aliases in the v1 API),
  so it cannot be taken for a version number; `default` is the version a bare model name means.
- Labels take lower-case keys and values of at most 63 characters of [a-z0-9_-]
  (https://cloud.google.com/vertex-ai/docs/general/labels): a metric's value 0.8731 is written
  0_8731.
- An endpoint's traffic_split maps deployed-model ids to percentages adding up to 100; in a
  DeployModelRequest the model being deployed is "0".
"""

import math
import re
from collections.abc import Mapping

from trainer.errors import UserError

ALIAS = re.compile(r"[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]")
DEFAULT_ALIAS = "default"
NEW_DEPLOYMENT = "0"
# A dry run cannot read the endpoint: the deployments serving now, as one stand-in key.
SERVING_NOW = "DEPLOYED_MODELS_SERVING_NOW"
LABEL_VALUE_LENGTH = 63


def version_aliases(value: str | None, promote: bool) -> list:
    """--version-aliases (comma-separated), checked; with --promote, `default` too."""
    aliases = [a.strip() for a in (value or "").split(",") if a.strip()]
    for alias in aliases:
        if not ALIAS.fullmatch(alias):
            raise UserError(
                f"--version-aliases: {alias!r} is not a version alias: a lower-case letter, "
                f"then letters, digits or '-', ending in a lower-case letter or digit "
                f"(2-128 characters)"
            )
    if promote and DEFAULT_ALIAS not in aliases:
        aliases.append(DEFAULT_ALIAS)
    return aliases


def label_value(value) -> str:
    """A number or text in the label-value rule: 0.8731 -> 0_8731, 'MiniLM' -> minilm."""
    text = f"{value:.4f}" if isinstance(value, float) else str(value)
    return re.sub(r"[^a-z0-9_-]", "_", text.lower())[:LABEL_VALUE_LENGTH]


def run_labels(metrics: Mapping) -> dict[str, str]:
    """The labels a registered version carries from its run's metrics.json: the data hash, the
    task, and validation's and test's top-level metrics (validation_macro_f1, test_accuracy, ...)."""
    labels = {key: label_value(metrics[key]) for key in ("data_hash", "task") if metrics.get(key)}
    for split in ("validation", "test"):
        for name, value in (metrics.get(split) or {}).items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if number and name != "examples" and math.isfinite(value):
                labels[label_value(f"{split}_{name}")] = label_value(float(value))
    return labels


def canary_split(serving: Mapping[str, int], percent: int) -> dict[str, int]:
    """The new deployment takes `percent`; the ones serving now share the rest in their current
    proportions (largest remainders round, so the split adds up to 100)."""
    rest = 100 - percent
    total = sum(serving.values())
    if not total:
        raise UserError(
            "--traffic-percent: the endpoint serves no traffic yet: deploy the first "
            "version with --promote, then canary the next ones"
        )
    exact = {key: rest * share / total for key, share in serving.items()}
    split = {key: math.floor(value) for key, value in exact.items()}
    for key in sorted(exact, key=lambda k: split[k] - exact[k])[: rest - sum(split.values())]:
        split[key] += 1
    return {NEW_DEPLOYMENT: percent, **split}


def promoted_split(serving: Mapping[str, int], deployed_id: str = NEW_DEPLOYMENT) -> dict[str, int]:
    """All traffic to `deployed_id`, none to the others serving now."""
    return {**{key: 0 for key in serving if key != deployed_id}, deployed_id: 100}
