"""What a task kind reads and feeds: its unit (a kind's `unit` attribute).

A unit owns its data from the file to the export: reading a run's splits and trainer.prepare's
rows, tokenizing and aligning them, the teacher's rows, the model's head, the export's serving
module and its checked copies (int8, ONNX), and a labelled file scored by trainer.evaluate.
The stages of a run, the export and the evaluation ask the unit; none of them asks what it is.

- texts.py: a text (or a pair) labelled as a whole, from CSV, TSV or JSON Lines columns
  (classification, regression, multi-label);
- tasks/tagging/sentences.py: a sentence labelled word by word (token classification).

Each method imports its numpy and TensorFlow code when it is called, as a kind's do: the ONNX
runtime loads a copy through its unit (`onnx_module`) where TensorFlow is not installed.
"""

import abc
import dataclasses


@dataclasses.dataclass
class Tokens:
    """A run's splits tokenized (Unit.tokenize), as the tokenize stage batches them."""

    splits: dict  # {split: input_pipeline.TokenizedSplit}
    training: object | None  # what the model trains on when not splits["train"] alone (distillation's transfer set)
    truncated: dict  # {split: rows cut at --max-seq-length} (metrics.json's truncated_texts)
    teacher_validation: object  # the teacher's validation values (numpy), aligned as the labels are; or None
    # How the rows were packed (an input_pipeline.LongTexts), when not as the run's --long-texts
    # says: the padding ladder is made for it (a bi-encoder's pairs, packed side by side).
    packing: object | None = None


class Unit(abc.ABC):
    noun: str  # one row, in messages ("texts", "sentences")
    onnx_sidecars: tuple = ()  # files an ONNX copy's folder holds beside the tokenizer's
    formats: str | None = None  # its labelled files, when not a table's columns (trainer.evaluate's --help)

    @property
    @abc.abstractmethod
    def teacher(self):
        """The teacher's rows: a module of `noun`, `suffix`, `unlabeled`, `values` and `write`
        (trainer.training.teacher asks it)."""

    @abc.abstractmethod
    def load(self, config, task):
        """Every split the config names, read, checked and carved for `task` (data.splits.Datasets)."""

    @abc.abstractmethod
    def prepare_rows(self, args, task):
        """trainer.prepare's --input, read (data.preparation.Labelled)."""

    @abc.abstractmethod
    def reads(self, pooling: str) -> str:
        """How the model reads a row, for the log ("mean pooling")."""

    @abc.abstractmethod
    def tokenize(self, config, datasets, preprocessor, long_texts, cache_root: str, build: bool, teacher_validation):
        """Every split tokenized (Tokens): `cache_root` holds the token cache, written by the
        chief (`build`); `teacher_validation` the teacher's validation values, or None."""

    @abc.abstractmethod
    def model(self, network, units: int, config, pooling: str, task, windows):
        """The run's Keras model on the encoder `network`, `units` outputs."""

    def served(self, model):
        """The Keras model the export serves, of a model the run built (model_of): by default the
        model itself (a bi-encoder's is its sentence encoder); what the copies convert."""
        return model

    @abc.abstractmethod
    def serving_module(self, task, preprocessor, model, label_names, max_seq_length: int, **sentence):
        """The export around `model` (a tf.Module): the run's, and its checked copies' (trainer.
        serving.quantize); `sentence`: the sentence settings (temperature, pair, long_texts,
        decisions) a unit may take."""

    @abc.abstractmethod
    def int8_module(self, float32_module, flatbuffers: dict):
        """The LiteRT int8 copy beside a loaded float32 export, answering as that one does."""

    @abc.abstractmethod
    def onnx_module(self, path: str):
        """An ONNX copy in `path`, loaded (TensorFlow not needed)."""

    @abc.abstractmethod
    def onnx_files(self, preprocessor, label_names, reference) -> dict:
        """{name: bytes} an ONNX copy writes beside its tokenizer's files (onnx_sidecars)."""

    @abc.abstractmethod
    def copy_parity(self, reference, loaded, float32: dict, candidate: dict, texts, pairs, features, max_difference):
        """An ONNX copy's figures against the float32 export on `texts` (serving.quantize.parity's);
        `features`: the float32 export's tokens of them, where it tokenizes outside its signature."""

    @abc.abstractmethod
    def labelled_rows(self, args, task, pair: bool, data, kind):
        """trainer.evaluate's --input as the model's run read its rows (serving.labelled_file.LabelledFile)."""

    @abc.abstractmethod
    def labels_of(self, rows, task, names: list) -> tuple:
        """(`rows`' labels encoded under the export's label `names`, the rows' sentences or None)."""
