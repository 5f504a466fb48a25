"""An export's serving signature, read from its saved_model.pb without loading the model: the
texts it takes (a sentence-pair model takes `text_pair`) and the outputs it returns, which tell
its task kind (task_registry.of_export). Loading an export restores every traced function (11 seconds
for the model of issue 64 on 2 cores); parsing the proto takes a fraction of one, so a command
checks its input against the model (the file's text columns, a tagger asked for explanations)
before it pays for the load.
"""

import dataclasses

from trainer import storage, task_registry
from trainer.errors import UserError


@dataclasses.dataclass(frozen=True)
class Signature:
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def pair(self) -> bool:
        """A sentence-pair export takes `text_pair` besides `text`."""
        return "text_pair" in self.inputs

    def task(self):
        """A fresh task object of the export's kind, told by its outputs (task_registry.of_export)."""
        return task_registry.of_export(self.outputs)


def require_export(model_dir: str) -> None:
    """Refuses a `model_dir` without an export in it, in one line."""
    storage.require_bucket(model_dir)
    if not storage.exists(storage.join(model_dir, "saved_model.pb")):
        raise UserError(
            f"--model-dir: no exported model in {model_dir} (expected saved_model.pb; point it at JOB_DIR/model)"
        )


def read(model_dir: str) -> Signature:
    """The serving signature of the export in `model_dir` (its float32 SavedModel, whose
    signature its bfloat16 and int8 copies share)."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2

    from trainer.serving.export import SIGNATURE

    require_export(model_dir)
    path = storage.join(model_dir, "saved_model.pb")
    proto = saved_model_pb2.SavedModel()
    try:
        proto.ParseFromString(storage.read_bytes(path))
    except DecodeError:
        raise UserError(
            f"--model-dir: {path} is not a SavedModel (it cannot be parsed); point --model-dir at JOB_DIR/model"
        ) from None
    for graph in proto.meta_graphs:
        if SIGNATURE in graph.signature_def:
            found = graph.signature_def[SIGNATURE]
            return Signature(tuple(found.inputs), tuple(found.outputs))
    raise UserError(f"--model-dir: {model_dir} has no {SIGNATURE!r} signature: it is not an export of this trainer")
