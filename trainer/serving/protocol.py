"""The online prediction contract: request JSON in, texts out; probabilities in, response JSON out.

Requests are Vertex's `{"instances": [...], "parameters": {...}}`. An instance is a string,
an object `{"text": "..."}` (JSON Lines batch prediction sends each line's object), or a
one-element array `["..."]` (CSV batch prediction sends each row as an array of its fields).
A sentence-pair model takes `{"text": "...", "text_pair": "..."}` or a two-element array.
`read_instance` is the one place that knows these forms.

Every problem is a RequestError naming what is wrong and where, answered as a 4xx with
`{"error": "..."}`; nothing a client sends can stop the server.
"""
import json
from typing import Sequence

# Vertex's limit for an online prediction request on a shared public endpoint.
MAX_BODY_BYTES = 1_500_000
INSTANCE_FIELDS = ("text", "text_pair")
PARAMETERS = ()  # the model takes none yet; any parameter sent is a mistake worth naming
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
               int: "a number", float: "a number", type(None): "null"}


class RequestError(Exception):
    """A request the server cannot answer as sent: its HTTP status and a one-line reason."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def json_type(value) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def parse_json(body: bytes):
    if not body.strip():
        raise RequestError(400, 'empty body: expected JSON {"instances": ["text", ...]}')
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        raise RequestError(400, "body is not UTF-8 text: send JSON encoded as UTF-8") from None
    except json.JSONDecodeError as e:
        raise RequestError(400, f"body is not JSON ({e.msg} at character {e.pos}): expected "
                                f'{{"instances": ["text", ...]}}') from None


def read_instances(payload, max_instances: int, pair: bool = False) -> list:
    """The texts (a pair model: (text, text_pair) tuples) of a parsed request body, in order."""
    if not isinstance(payload, dict):
        raise RequestError(400, f'expected a JSON object {{"instances": [...]}}, got {json_type(payload)}')
    if "instances" not in payload:
        raise RequestError(400, 'no "instances" in the request: expected {"instances": ["text", ...]}')
    instances = payload["instances"]
    if not isinstance(instances, list):
        raise RequestError(400, f'"instances" must be an array, got {json_type(instances)}')
    if not instances:
        raise RequestError(400, '"instances" is empty: send at least one text')
    if len(instances) > max_instances:
        raise RequestError(400, f'"instances" has {len(instances)} items, more than this server\'s '
                                f"limit of {max_instances} (--max-instances): split the request")
    check_parameters(payload.get("parameters"))
    return [read_instance(i, value, pair) for i, value in enumerate(instances)]


def check_parameters(parameters) -> None:
    if parameters is None:
        return
    if not isinstance(parameters, dict):
        raise RequestError(400, f'"parameters" must be an object, got {json_type(parameters)}')
    unknown = sorted(set(parameters) - set(PARAMETERS))
    if unknown:
        raise RequestError(400, f'"parameters": unknown parameter(s) {", ".join(unknown)}; this model '
                                f"takes none")


def read_instance(index: int, value, pair: bool = False):
    """A text, or for a pair model a (text, text_pair) tuple."""
    where = f"instances[{index}]"
    fields = INSTANCE_FIELDS if pair else INSTANCE_FIELDS[:1]
    if isinstance(value, list) and len(value) == len(fields) and all(isinstance(v, str) for v in value):
        return tuple(value) if pair else value[0]
    if isinstance(value, str) and not pair:
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise RequestError(400, f"{where}: unknown field(s) {', '.join(unknown)}; expected "
                                    f"{' and '.join(fields)}")
        for field in fields:
            if field not in value:
                raise RequestError(400, f'{where}: no "{field}" field: expected {_EXPECTED[pair]}')
            if not isinstance(value[field], str):
                raise RequestError(400, f"{where}.{field}: expected a string, got {json_type(value[field])}")
        return tuple(value[f] for f in fields) if pair else value["text"]
    raise RequestError(400, f"{where}: expected {_FORMS[pair]}, got {json_type(value)}")


_EXPECTED = {False: '{"text": "..."}', True: '{"text": "...", "text_pair": "..."}'}
_FORMS = {False: 'a string, {"text": "..."} or ["..."]',
          True: '{"text": "...", "text_pair": "..."} or ["...", "..."] (this model reads sentence pairs)'}


def score_predictions(scores) -> list:
    """`[{"score": ...}]`, one per row, as trainer.predict's predicted_score."""
    return [{"score": float(score)} for score in scores]


def label_set_predictions(probabilities, label_names: Sequence[str], chosen) -> list:
    """`[{"labels": [...], "probabilities": {name: p}}]`: a multi-label model's labels above
    their thresholds, as trainer.predict's predicted_labels."""
    return [{"labels": [name for name, picked in zip(label_names, row_chosen) if picked],
             "probabilities": {name: float(p) for name, p in zip(label_names, row)}}
            for row, row_chosen in zip(probabilities, chosen)]


def predictions(probabilities, label_names: Sequence[str]) -> list:
    """`[{"label": ..., "probabilities": {name: p}}]`, one per row; the label is the most
    probable class, as trainer.predict's predicted_label."""
    return [{"label": label_names[int(row.argmax())],
             "probabilities": {name: float(p) for name, p in zip(label_names, row)}}
            for row in probabilities]
