"""The interface every task kind implements. The stages of a run, the data, the export and its
checked copies, the operating point, the label issues and the report talk only to this: none
of them names a task (tests/test_layout.py checks that no module outside trainer/tasks/ does).

A kind is this core, which every kind defines, plus optional parts (trainer/tasks/parts/: the
operating point, calibration, label issues, explanations, distillation), each an attribute that
is None when the kind cannot do it: what a kind can do is stated once, by the parts it holds.
What it reads and feeds, from its files to its export's copies, is its `unit`
(trainer/tasks/units/).

A task kind is one folder under trainer/tasks/ and one line of trainer/tasks/__init__.py, which
registers it (trainer/task_registry.py). Its class's module stays light: every entry point
registers the kinds, trainer.config asks them (--task's choices, the metrics --selection-metric
may name, each task's flag checks), and `--help` and the ONNX runtime answer without numpy or
TensorFlow, so a task's methods import its numpy, scikit-learn and TensorFlow code (the modules
beside it) when they are called.

Modelled on TF Model Garden's sentence-prediction task (official/nlp/tasks/
sentence_prediction.py), where classification and regression sit behind one interface.
"""

import abc
from collections.abc import Mapping, Sequence

from trainer import reading
from trainer.tasks import parts
from trainer.tasks.units import Unit
from trainer.tasks.units.texts import TEXTS


class Task(abc.ABC):
    # --- What it is --------------------------------------------------------------------------
    name: str  # --task's value; metrics.json's `task`
    # The validation metrics that may pick the best epoch (--selection-metric, early stopping,
    # Vertex tuning), each "maximize" or "minimize"; the first is the task's default.
    metric_goals: Mapping[str, str]
    train_metric: str  # the Keras metric logged while training ("accuracy", "mae")
    summary_metrics: Sequence[str]  # keys of summarize() tracked per epoch as val_<key>, besides loss
    loss_name: str  # what the loss measures, in words (the report's axis label)
    label_noun = "class"  # what one of its outputs is called in messages: "class" or "label"
    # What one row of its data is, and everything that reads, feeds and exports it: text rows
    # (trainer/tasks/units/texts.py) or tagged sentences (tagging/sentences.py).
    unit: Unit
    # The label columns looked for when --label-column is not given, in order.
    label_column_names: Sequence[str] = reading.LABEL_COLUMNS
    # Whether the model means something before it trains (a sentence encoder's vectors; a new
    # head's outputs do not): its validation figures then are measured first, metrics.json's
    # zero_shot (trainer.training.zero_shot).
    zero_shot = False
    # Encoders this wide and wider train without layer-wise decay when --layer-decay is not given
    # (layer_decay); None: the width rule's decay for every width.
    undecayed_width: int | None = None
    # Training batches of runs of this many rows of one label (input_pipeline.label_groups), for
    # a loss that needs several texts of a label in a batch; 1: rows as shuffled.
    rows_per_label = 1
    # --loss's values this kind trains with besides auto (its one loss: none to choose).
    losses: Sequence[str] = ()
    # Whether --embedding-dims applies: the kind's output is a vector whose leading dimensions
    # can be trained to work alone.
    nests_dims = False
    # Whether --negative-column applies: the kind trains each row's first text against a third,
    # its hard negative.
    hard_negatives = False
    # Whether --long-texts windows reads pairs: each text of a pair is encoded alone (a
    # bi-encoder), so each is cut into windows of its own; a pair read together is not.
    pairs_in_windows = False

    @classmethod
    def claims(cls, training_file: str) -> bool:
        """Whether --task auto trains this kind on `training_file` (tagged sentences are token
        classification's); the first kind of the registry takes any other file."""
        return False

    @classmethod
    def settle(cls, config) -> None:
        """Sets the flags this kind leaves to its data (embeddings: --loss auto by the training
        file's columns), once, as the config is built. None by default."""

    @classmethod
    def with_settings(cls, settings) -> "Task":
        """The task object of a run whose training flags (TrainConfig's, by name: a config's,
        or a finished run's metrics.json `hyperparameters`) are `settings`: by default the
        kind's one object; a kind trained otherwise by a flag (--loss) returns that variant."""
        return cls()

    def scoring(self, data) -> "Task":
        """The task that scores a labelled file (trainer.evaluate) whose columns are found by
        `data` (training_file: the file; delimiter, text_column, text_pair_column,
        label_column): this one; a kind with variants returns the one that file trains."""
        return self

    @classmethod
    def variants(cls) -> tuple:
        """The classes with_settings may return: the metrics any of them selects by."""
        return (cls,)

    def refusal(self, part: str, flag: str) -> str | None:
        """The one line refusing `flag` because this kind has no `part` (parts.refusal), or None
        when it has it: what the floors below the kinds (explaining/) ask the task object."""
        return None if getattr(self, part) is not None else parts.refusal(self, part, flag)

    @property
    def default_metric(self) -> str:
        """--selection-metric when it is not given."""
        return next(iter(self.metric_goals))

    def check_flags(self, config, require) -> None:
        """The flags whose sense depends on the task, checked with the config (trainer.config's
        validate; `require(ok, flag, message)` raises the flag's one-line error). By default:
        --label-columns belongs to multi-label data, and --loss is the kind's own."""
        require(config.data.label_columns is None, "--label-columns", "needs --task multi-label")
        require(
            config.data.long_texts != "windows" or config.data.text_pair_column is None or self.pairs_in_windows,
            "--long-texts",
            "windows read single texts; use --long-texts head-tail or truncate for pairs (--text-pair-column)",
        )
        self.check_loss(config, require)

    def check_loss(self, config, require) -> None:
        """--loss: auto, or one of the kind's own (Task.losses); --embedding-dims: a kind whose
        output is a vector's; --negative-column: a kind that trains on hard negatives."""
        require(
            config.train.embedding_dims is None or self.nests_dims,
            "--embedding-dims",
            f"needs a model of vectors (--task embedding), not --task {self.name}",
        )
        require(
            config.data.negative_column is None or self.hard_negatives,
            "--negative-column",
            "needs pairs without a score (--task embedding, --loss multiple-negatives), not "
            + (f"--loss {config.train.loss}" if self.losses else f"--task {self.name}"),
        )
        loss = config.train.loss
        require(
            loss == "auto" or loss in self.losses,
            "--loss",
            f"{loss} is not a loss of --task {self.name}"
            + (f"; choose one of {['auto', *self.losses]}" if self.losses else " (it has one: leave --loss auto)"),
        )

    # --- Labels: read, checked, counted, split ------------------------------------------------
    def label_columns(self, first, data) -> tuple:
        """(the label column's name for messages and metrics.json, the columns holding the
        labels) in a file whose first rows are `first`; `data` is the config's DataConfig."""
        column = reading.pick_column(first, data.label_column, self.label_column_names, "--label-column", "label")
        return column, [column]

    def check_labels(self, frame, column: str, labels, spec, data) -> None:
        """Checks of any labelled file's encoded labels (trainer.prepare's and the training
        data's): none by default."""

    def check_training_labels(self, frame, column: str, labels, spec, data, source: str) -> None:
        """Checks of the training split's labels (e.g. classes too small to learn, likely
        typos); `source` names its files. By default check_labels'."""
        self.check_labels(frame, column, labels, spec, data)

    @abc.abstractmethod
    def label_counts(self, labels, spec) -> dict:
        """{class or label: rows} of a split, for the log and metrics.json's class_counts
        ({} for a task without classes)."""

    def describe_labels(self, spec) -> str:
        """How the label column is read, for the run's log."""
        return f"{spec.kind}: {spec.names}"

    def label_summary(self, labels, spec) -> str:
        """A split's labels in a few words (trainer.prepare's line per file)."""
        counts = self.label_counts(labels, spec)
        return ", ".join(f"{label} {count} ({count / max(len(labels), 1):.0%})" for label, count in counts.items())

    def held_out_strata(self, labels):
        """What a run's carved validation split, its --train-fraction subset and its
        --find-label-issues folds are stratified on (an array per row), or None for a random
        split."""
        return None

    @abc.abstractmethod
    def prepare_strata(self, labels, minimum: int):
        """What trainer.prepare stratifies each row on, every stratum holding `minimum` rows
        where the task can pool small ones."""

    # --- The model ----------------------------------------------------------------------------
    def prepare(self, spec, train_labels) -> None:
        """Learns what the task needs from the training data: its LabelSpec and labels (e.g.
        their scale)."""

    @abc.abstractmethod
    def output_units(self, labels) -> int:
        """Width of the head's output layer (`labels`: the LabelSpec)."""

    def output_layer(self, outputs):
        """Maps the head's float32 outputs to what the model returns (identity by default)."""
        return outputs

    def learning_rate(self, by_width: float, hidden_size: int) -> float:
        """The peak learning rate when --learning-rate is not given: `by_width`, the recipe's
        rule for an encoder of `hidden_size` (trainer.config's), unless the kind has its own."""
        return by_width

    def layer_decay(self, by_width: float, hidden_size: int) -> float:
        """Layer decay when --layer-decay is not given: `by_width`, the recipe's rule for an
        encoder of `hidden_size` (trainer.config's, chosen on sentence tasks by bench/recipe.py),
        or none from the kind's `undecayed_width` on."""
        undecayed = self.undecayed_width is not None and hidden_size >= self.undecayed_width
        return 1.0 if undecayed else by_width

    @abc.abstractmethod
    def loss(self):
        """The Keras loss the model trains with."""

    @abc.abstractmethod
    def keras_metrics(self) -> list:
        """The Keras metrics logged while training."""

    def history_columns(self) -> tuple:
        """eval_history.csv's columns, in order."""
        return (
            "epoch",
            "step",
            "loss",
            self.train_metric,
            "val_loss",
            *(f"val_{key}" for key in self.summary_metrics),
            "learning_rate",
            "seconds",
        )

    def epoch_metrics(self) -> tuple:
        """The keys of summarize() that become val_* columns each epoch."""
        return ("loss", *self.summary_metrics)

    @abc.abstractmethod
    def summarize(self, outputs, labels, label_names) -> dict:
        """metrics.json's block of one split, from the model's outputs over the whole split."""

    @abc.abstractmethod
    def describe(self, result: dict) -> str:
        """One log line's worth of a split's metrics."""

    @abc.abstractmethod
    def describe_epoch(self, logs: dict) -> str:
        """An epoch's training and validation metrics, for its progress line."""

    # --- Optional parts (trainer.tasks.parts): each the part's object, or None when the kind
    # cannot do it. A kind sets those it has in __init__ (the parts read its state).
    operating_point = None  # --target-precision/--target-recall: parts.threshold.OperatingPoint
    calibration = None  # a temperature fitted on validation: parts.temperature.Calibration
    label_issues = None  # cleanlab's ranking, label_issues.csv: parts.label_quality.LabelIssues
    explanations = None  # token attributions: parts.attribution.Explanations
    distillation = None  # a teacher's outputs as targets: parts.teacher_targets.Distillation

    def plain(self, labels):
        """`labels` as plain labels, unpacked if a distilled run packed them with the teacher's
        targets: every score and count of a split reads the plain ones."""
        packed = self.distillation is not None and self.distillation.is_packed(labels)
        return self.distillation.unpack(labels) if packed else labels

    def compiled_with(self, distillation=None) -> tuple:
        """(loss, Keras metrics) the model trains with: the kind's own; with a teacher
        (`distillation`: the config's DistillationConfig, given only when a teacher is present),
        its distillation part's loss over the packed targets and the training metrics that read
        them."""
        if distillation is None:
            return self.loss(), self.keras_metrics()
        part = self.distillation
        return part.loss(distillation.distill_temperature, distillation.distill_alpha), part.metrics()

    # --- After training: what is decided on validation ----------------------------------------
    def fit_on_validation(self, outputs, labels) -> None:
        """After training: fits what the task decides on validation (multi-label thresholds)."""

    def validation_caveat(self, has_test: bool) -> str | None:
        """Why the validation figures flatter the model, when fit_on_validation or the
        operating point decided something on that very split (metrics.json's validation
        `caveat`); None otherwise."""
        return None

    # --- The export -----------------------------------------------------------------------------
    exported_outputs = "probabilities"  # what the export returns, in the log's words
    # The exported output a user acts on, per row: what the quantized copies are checked on.
    decision_output: str
    decision_variables: Sequence[str] = ()  # names of the export's variables of export_decisions

    def export_decisions(self) -> dict:
        """{variable name: value} of the decisions the export stores as variables (a binary
        classifier's threshold, multi-label's per-label thresholds), so a loaded model still
        tells them."""
        return {}

    def decisions_of_export(self, module) -> dict:
        """export_decisions' values as a loaded export (`module`) holds them, for a copy of it
        that must decide alike."""
        found = {name: getattr(module, name, None) for name in self.decision_variables}
        return {name: value.numpy().tolist() for name, value in found.items() if value is not None}

    def joined_outputs(self) -> dict:
        """{output: (the 0/1 output [B, C] that picks label names, separator)} of the exported
        outputs that join the picked label names into one string. ONNX opset 17 has no string
        concatenation: the ONNX export builds these from the label names rather than convert
        the join (trainer.serving.onnx.convert)."""
        return {}

    # --- A loaded export's answers (trainer.predict, trainer.serve, trainer.explain) ------------
    # A model dir tells its kind by its signature's outputs, not by a name (its metrics.json may
    # be elsewhere, or older than tasks): export_mark is the output only this kind's exports
    # return, in every version (trainer.tasks.of_export).
    export_mark: str
    # The signature outputs the answers below are made of, as predict_outputs returns them
    # (trainer.inference.loaded_model: numpy per row; `label_names` once, as bytes).
    answer_outputs: Sequence[str]

    @classmethod
    def recognizes(cls, output_names) -> bool:
        """Whether a loaded export whose signature returns `output_names` is of this kind."""
        return cls.export_mark in output_names

    @abc.abstractmethod
    def predicted_columns(self, outputs) -> dict:
        """{column: a value per row} trainer.predict adds to a chunk of rows, in order, of
        answer_outputs' values for those rows."""

    # The predicted columns a .npy --output of trainer.predict stacks into one array, those a
    # chunk has, in this order (serving/npy_output.py): a vector per text; none for a kind
    # whose answers are not vectors (the .npy output is refused).
    array_columns: Sequence[str] = ()

    # Whether a model of one text per row, given a file of two (trainer.predict), answers each
    # text and compares the two: then it defines compared_columns (a sentence embedding's
    # vectors and their cosine).
    compares_pairs = False

    @abc.abstractmethod
    def served_predictions(self, outputs) -> list:
        """The server's answer per row (one JSON object each), of answer_outputs' values: the
        same decisions as predicted_columns' (docs/prediction.md, "Serve over HTTP")."""

    # --- The quantized copies' check (trainer.serving.agreement) -----------------------------
    agreement_metric: str  # the metric of metrics.json a user reads first

    def agreement_outputs(self) -> tuple:
        """The export's outputs the check reads (predict_outputs' names)."""
        return (self.decision_output,)

    def agreement_values(self, outputs: dict):
        """What agreement_decisions and agreement_value read, per row, of agreement_outputs'
        values: by default decision_output's."""
        return outputs[self.decision_output]

    def agreement_labels(self, split):
        """A split's labels as agreement_value reads them, per row: by default its labels."""
        return split.labels

    def agreement_decisions(self, outputs):
        """What a user acts on per row, of agreement_values': compared between a copy
        and its float32 model; None when the task decides no labels (its metric alone is
        checked)."""
        return None

    # What decisions_agree's figure is of: "rows" (the share deciding alike), "entities" or
    # "vectors" (the share of texts whose vectors are alike).
    agreement_of = "rows"

    def decisions_agree(self, ours, theirs) -> float:
        """How much a copy's decisions (agreement_decisions' values) agree with float32's
        `ours`: by default the share of rows deciding alike (every label of a row's)."""
        import numpy as np

        same = ours == theirs
        return float(np.mean(same if same.ndim == 1 else same.all(axis=1)))

    @abc.abstractmethod
    def agreement_value(self, outputs, labels, label_names) -> float:
        """agreement_metric of agreement_values' against the labels."""

    # --- The report -----------------------------------------------------------------------------
    figures: Sequence[str] = ()  # the report's figures after the learning curves (kinds, in order)

    def cosine_histograms(self, predictions) -> list:
        """The report's histograms of cosines, for a kind whose model places texts in a space:
        [{"file", "title", "groups": {split: {group: [N] cosines}}, "panel" (each panel's
        title), "counted" (what a bar counts), "note"}], drawn by trainer.reporting; none here."""
        return []

    def nearest_neighbours(self, predictions) -> list:
        """The report's section of a few texts and the texts nearest them, for a kind whose
        model places texts in a space (embeddings: tasks/embedding/neighbours.py); none here."""
        return []

    # The metrics.json key of each class's (label's) precision, recall, F1 and support, or None.
    per_label_metrics: str | None = None
    error_columns: Sequence[str]  # errors.csv's columns (text_pair follows for pairs)
    errors_description: str  # what errors.csv lists, after "Per split, up to N"
    # MODEL_CARD.md's task sections (trainer.reporting.model_card): Jinja templates
    # "what_it_does" and "metrics", and "usage" (the signature's outputs, a line of Python),
    # "predict_columns" (what trainer.predict adds), "counts_note" (after the data table).
    model_card: Mapping[str, str]

    @abc.abstractmethod
    def title(self, labels) -> str:
        """What the model is, in a few words ("3-class classifier")."""

    @abc.abstractmethod
    def split_predictions(self, outputs, labels, texts, pairs, temperature: float):
        """A trainer.inference.split_predictions.SplitPredictions of the run's outputs of a split, as
        its export returns them (at `temperature` and the task's decisions)."""

    # --- A loaded export scored on labelled rows (trainer.evaluate, trainer.report): its
    # outputs turned back into the model's, decided as the export decides, then summarize and
    # split_predictions as for the run's own splits
    def export_names(self, exported: dict) -> list:
        """The class, label or tag names of a loaded export's outputs (predict_outputs'), in
        the order of its outputs: by default its `label_names`; None when the export names no
        classes its labels have (a labelled file's own are read from it)."""
        from trainer.inference import split_predictions

        return split_predictions.label_names_of(exported)

    def decide_as(self, decisions: dict, temperature: float) -> None:
        """Takes a loaded export's decisions (decisions_of_export's values), at its
        `temperature`, as the task's own: summarize and split_predictions of
        outputs_of_export's outputs then decide as the export does. Nothing by default."""

    @abc.abstractmethod
    def outputs_of_export(self, exported: dict, temperature: float, sentences=None):
        """The model's outputs as summarize reads them, recovered from a loaded export's
        (`exported`: each output of the signature, numpy, for every row:
        trainer.inference.loaded_model.predict_outputs; `temperature` the export's). A task of words
        reads the export's words at the words of the tagged `sentences` scored."""

    @abc.abstractmethod
    def error_measure(self, predictions, names) -> tuple:
        """(how wrong each row is, whether it is an error or None when every row is ranked by
        its error alone, {errors.csv column: value per row}) of a SplitPredictions."""


class TextTask(Task):
    """A kind whose row is a text (or a pair) labelled as a whole (its unit: units/texts.py): its
    labels are read from a file's columns (data/splits.py) and its export is
    serving/export.ServingModule. Classification, regression and multi-label are; token
    classification, whose rows are tagged sentences read whole, its export
    tasks/tagging/export.py's, is a Task but not one of these. What a kind can do beyond its
    core is not said by its class but by its parts (Task.operating_point, ...)."""

    unit = TEXTS

    @abc.abstractmethod
    def label_spec(self, frame, column: str, data):
        """What the training labels are (a trainer.data.labels.LabelSpec), decided from `frame`,
        each distinct label of the training file once (`_file`/`_row` columns name its row)."""

    @abc.abstractmethod
    def encode_labels(self, frame, column: str, spec, split_name: str):
        """The labels of `frame`'s rows under `spec` as the model trains on them (an array of
        as many rows); an unknown or malformed value is an error naming its row."""

    @abc.abstractmethod
    def serving_outputs(self, module, logits, batch) -> dict:
        """The serving signature's outputs (TensorFlow) of the head's float32 outputs `logits`
        of a `batch` of rows; `module` (trainer.serving.export.ServingModule) holds the label
        names, the temperature and the export_decisions variables."""
