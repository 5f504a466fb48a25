"""The fine-tuned encoder of a finished training job, read back from its job directory.

A job dir holds config.json (which encoder, preprocessor and sequence length the run used) and
model/, the serving SavedModel, whose variables are the classifier's: the fine-tuned encoder's
under their Model Garden names, plus the head. The encoder is rebuilt from the run's own
`--encoder` (its architecture and vocabulary), then given the fine-tuned weights.
"""

import os

from trainer import config as config_lib
from trainer import storage
from trainer.errors import UserError


def is_job_dir(path: str) -> bool:
    """A trainer job dir: config.json next to model/saved_model.pb (a Hugging Face checkpoint
    also has a config.json, but no model/)."""
    return storage.exists(storage.join(path, "config.json")) and storage.exists(
        storage.join(path, "model/saved_model.pb")
    )


def job_config(job_dir: str) -> config_lib.Config:
    try:
        return config_lib.load(storage.join(job_dir, "config.json"))
    except (ValueError, UserError) as e:
        raise UserError(f"--encoder {job_dir}: config.json is not a trainer run's config ({e})") from None


def load_finetuned_encoder(job_dir: str, *, seq_length=None, cache_dir=None):
    """(Encoder with the fine-tuned weights, the run's Config)."""
    from trainer.modeling.encoders import assign_weights, checkpoints, load_encoder

    run = job_config(job_dir)
    model_dir = storage.join(job_dir, "model")
    try:
        encoder = load_encoder(
            run.model.encoder,
            preprocessor=run.model.preprocessor,
            backend="native",
            seq_length=seq_length or run.data.max_seq_length,
            cache_dir=cache_dir or run.output.cache_dir,
        )
    except UserError as e:
        raise UserError(
            f"--encoder {job_dir}: the run's encoder {run.model.encoder!r} (its "
            f"architecture and vocabulary) is needed to rebuild the fine-tuned one: {e}"
        ) from None
    weights = checkpoints.savedmodel_weights(model_dir)
    assign_weights(encoder.network, weights, os.path.join(model_dir, "variables"))
    encoder.source = f"{job_dir} (fine-tuned {run.model.encoder})"
    return encoder, run
