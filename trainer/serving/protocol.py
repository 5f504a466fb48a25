"""The online prediction contract: request JSON in, texts out; an empty text's answer and explanations out.

Requests are Vertex's `{"instances": [...], "parameters": {...}}`. An instance is a string,
an object `{"text": "..."}` (JSON Lines batch prediction sends each line's object), or a
one-element array `["..."]` (CSV batch prediction sends each row as an array of its fields).
A sentence-pair model takes `{"text": "...", "text_pair": "..."}` or a two-element array. An
object may also name its texts by the model's own columns (`{"question": ..., "answer": ...}`
for a model trained on those), as a JSON Lines row of the training data would.
`InstanceForms` is the one place that knows these forms. Each text's answer is its model's task
kind's (Task.served_predictions, through trainer.serving.protocol.predict_instances).

Every problem is a RequestError naming what is wrong and where, answered as a 4xx with
`{"error": "..."}`; nothing a client sends can stop the server.
"""

import json

# Vertex's limit for an online prediction request on a shared public endpoint.
MAX_BODY_BYTES = 1_500_000
INSTANCE_FIELDS = ("text", "text_pair")
# {"explain": true} adds each text's token attributions to its prediction (trainer.explaining).
PARAMETERS = ("explain",)
# An empty text gets this note instead of a prediction: training refuses empty texts, so a label
# for one would be confident and meaningless.
EMPTY_NOTE = "empty text: no prediction"
_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    type(None): "null",
}


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
        raise RequestError(
            400, f'body is not JSON ({e.msg} at character {e.pos}): expected {{"instances": ["text", ...]}}'
        ) from None
    except RecursionError:  # arrays or objects nested thousands deep
        raise RequestError(
            400, 'body nests arrays or objects too deeply: expected {"instances": ["text", ...]}'
        ) from None


def read_instances(payload, max_instances: int, pair: bool = False, columns: tuple = (None, None)) -> list:
    """The texts (a pair model: (text, text_pair) tuples) of a parsed request body, in order.
    `columns`: the model's own column names (trainer.serving.columns), which an object
    instance may use instead of "text" and "text_pair"."""
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
        raise RequestError(
            400,
            f'"instances" has {len(instances)} items, more than this server\'s '
            f"limit of {max_instances} (--max-instances): split the request",
        )
    check_parameters(payload.get("parameters"))
    forms = InstanceForms(pair, columns)
    return [forms.read(i, value) for i, value in enumerate(instances)]


def check_parameters(parameters) -> None:
    if parameters is None:
        return
    if not isinstance(parameters, dict):
        raise RequestError(400, f'"parameters" must be an object, got {json_type(parameters)}')
    unknown = sorted(set(parameters) - set(PARAMETERS))
    if unknown:
        raise RequestError(
            400, f'"parameters": unknown parameter(s) {", ".join(unknown)}; this model takes only "explain"'
        )
    if not isinstance(parameters.get("explain", False), bool):
        raise RequestError(400, f'"parameters".explain: expected true or false, got {json_type(parameters["explain"])}')


def explain_requested(payload: dict) -> bool:
    """Whether a request (read_instances has checked it) asks for token attributions."""
    return bool((payload.get("parameters") or {}).get("explain", False))


def explanations(explained, pair: bool = False) -> list:
    """`[{"label", "output", "baseline_output", "words": [{"word", "weight"(, "text")}]}]` per
    text, from trainer.explaining.attribute.explain_texts: every word in the text's order (a
    pair model's marked "text" or "text_pair"); a score's label is null."""
    return [
        [
            {
                "label": e.target,
                "output": e.output,
                "baseline_output": e.baseline_output,
                "words": [
                    {"word": w.text, "weight": w.weight, **({"text": INSTANCE_FIELDS[w.segment]} if pair else {})}
                    for w in e.words
                ],
            }
            for e in row
        ]
        for row in explained
    ]


class InstanceForms:
    """The forms an instance may take for one model: a string (single texts only), an array of
    its texts, or an object naming them "text" (and "text_pair") or by the model's own columns."""

    def __init__(self, pair: bool = False, columns: tuple = (None, None)):
        self.pair = pair
        self.fields = INSTANCE_FIELDS if pair else INSTANCE_FIELDS[:1]
        # Each field's accepted names: its own, and the model's column when it has another name.
        self.names = [
            (field,) + ((column,) if column and column != field else ()) for field, column in zip(self.fields, columns)
        ]
        own = tuple(names[-1] for names in self.names)
        self.objects = " or ".join(
            "{" + ", ".join(f'"{name}": "..."' for name in names) + "}"
            for names in dict.fromkeys([tuple(self.fields), own])
        )
        self.array = '["...", "..."]' if pair else '["..."]'

    def read(self, index: int, value):
        """A text, or for a pair model a (text, text_pair) tuple."""
        where = f"instances[{index}]"
        if isinstance(value, str) and not self.pair:
            return value
        if isinstance(value, list):
            return self._array(where, value)
        if isinstance(value, dict):
            return self._object(where, value)
        strings = "" if self.pair else "a string, "
        reads = " (this model reads sentence pairs)" if self.pair else ""
        raise RequestError(
            400, f"{where}: expected {strings}{self.objects} or {self.array}{reads}, got {json_type(value)}"
        )

    def _array(self, where: str, value: list):
        if len(value) != len(self.fields):
            reads = "sentence pairs" if self.pair else "one text per instance"
            raise RequestError(
                400, f"{where}: this model reads {reads}: expected {self.array}, got an array of {len(value)} items"
            )
        for i, text in enumerate(value):
            if not isinstance(text, str):
                raise RequestError(400, f"{where}[{i}]: expected a string, got {json_type(text)}")
        return tuple(value) if self.pair else value[0]

    def _object(self, where: str, value: dict):
        known = {name for names in self.names for name in names}
        unknown = sorted(set(value) - known)
        if unknown:
            raise RequestError(400, f"{where}: unknown field(s) {', '.join(unknown)}; expected {self.objects}")
        texts = []
        for names in self.names:
            given = [name for name in names if name in value]
            if not given:
                raise RequestError(400, f'{where}: no "{names[0]}" field: expected {self.objects}')
            if len(given) > 1:
                raise RequestError(400, f"{where}: both {' and '.join(given)} given; send one")
            if not isinstance(value[given[0]], str):
                raise RequestError(400, f"{where}.{given[0]}: expected a string, got {json_type(value[given[0]])}")
            texts.append(value[given[0]])
        return tuple(texts) if self.pair else texts[0]


def no_prediction(prediction: dict) -> dict:
    """The answer to an empty text: `prediction`'s fields null, and a note saying why (as
    trainer.predict's empty cells and `note` column)."""
    return {**dict.fromkeys(prediction), "note": EMPTY_NOTE}


def predict_instances(model, instances, batch_size: int):
    """The server's batch function: (one response prediction per instance, None); instances are
    texts, or (text, pair) tuples for a pair model."""
    from trainer.inference import loaded_model

    texts, pairs = instances, None
    if loaded_model.is_pair_model(model):
        texts, pairs = [a for a, _ in instances], [b for _, b in instances]
    task = loaded_model.task_of(model)
    predictions = task.served_predictions(loaded_model.task_outputs(model, task, texts, batch_size, pairs))
    empty = loaded_model.empty_rows(texts, pairs)
    return [no_prediction(p) if e else p for p, e in zip(predictions, empty)], None
