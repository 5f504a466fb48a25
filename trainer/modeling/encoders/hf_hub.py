"""`--encoder hf:ORG/NAME[@REVISION]`: a Hugging Face Hub model repository, downloaded once.

Only what the native encoder reads is fetched: the config, the vocabulary and tokenizer
settings, sentence-transformers' pooling mode, and one weight file (model.safetensors, else
tf_model.h5). Downloads go through huggingface_hub into its cache layout (snapshots/COMMIT,
refs/REVISION) under `cache_dir`/huggingface unless HF_HUB_CACHE is set, so a Docker image can
bake them in and a later run reuses them: online it asks the Hub which commit REVISION names and
downloads nothing it already has; offline it takes the commit the cache last saw for REVISION.
HF_TOKEN (read by huggingface_hub) opens private and gated repositories; HF_ENDPOINT points at
another Hub server.
"""

import dataclasses
import os
import re

from trainer.errors import UserError
from trainer.modeling.encoders import families, hf_weights
from trainer.modeling.encoders.network import unreachable

PREFIX = "hf:"
# Besides one weight file: what checkpoints.read_hf_checkpoint and registry read, and every
# family's tokenizer files (the repository's config.json says which family it is, once here).
_SETTINGS_FILES = ("config.json", "tokenizer_config.json", "special_tokens_map.json", "1_Pooling/config.json")
_SPEC = re.compile(r"hf:([\w.-]+/[\w.-]+)(?:@([^\s@]+))?")


@dataclasses.dataclass(frozen=True)
class RepoSpec:
    repo_id: str
    revision: str | None  # a branch, tag or commit sha; None: the default branch


def is_spec(encoder: str) -> bool:
    return encoder.startswith(PREFIX)


def parse(encoder: str) -> RepoSpec:
    """The repository and revision of an `hf:` value; a UserError for a malformed one."""
    match = _SPEC.fullmatch(encoder)
    if match is None:
        raise UserError(
            f"--encoder {encoder}: expected hf:ORG/NAME or hf:ORG/NAME@REVISION "
            "(a branch, tag or commit sha), e.g. hf:google/electra-small-discriminator"
        )
    return RepoSpec(match.group(1), match.group(2))


def download(encoder: str, cache_dir: str) -> str:
    """The local snapshot directory of `encoder` (an hf: value), downloading what is missing."""
    from huggingface_hub import constants, snapshot_download

    spec = parse(encoder)
    # huggingface_hub reads HF_ENDPOINT once, when it is imported (constants.ENDPOINT): passing
    # it on each call honours a value set later in the process too.
    endpoint = os.environ.get("HF_ENDPOINT") or None
    hub_cache = os.environ.get("HF_HUB_CACHE") or os.path.join(cache_dir, "huggingface")
    if constants.HF_HUB_OFFLINE:
        offline = "HF_HUB_OFFLINE is set"
    else:
        unreached = unreachable(endpoint or constants.ENDPOINT)
        offline = unreached and f"cannot reach {unreached}"
    if offline:
        return _cached_snapshot(spec, hub_cache, encoder, offline)
    try:
        files = _remote_files(spec, endpoint)
        return snapshot_download(
            spec.repo_id,
            revision=spec.revision,
            cache_dir=hub_cache,
            endpoint=endpoint,
            allow_patterns=_wanted_files(files, encoder, spec),
        )
    except UserError:
        raise
    except Exception as error:  # huggingface_hub's and its HTTP client's errors
        raise _user_error(error, encoder, spec) from None


def _remote_files(spec: RepoSpec, endpoint: str | None) -> list[str]:
    from huggingface_hub import HfApi

    info = HfApi(endpoint=endpoint).model_info(spec.repo_id, revision=spec.revision)
    return [sibling.rfilename for sibling in info.siblings or []]


def _cached_snapshot(spec: RepoSpec, hub_cache: str, encoder: str, offline: str) -> str:
    """Offline: the snapshot last downloaded for REVISION (huggingface_hub resolves a branch or
    tag through the cache's refs/), when it holds a weight file; else a UserError."""
    from huggingface_hub import try_to_load_from_cache

    config = try_to_load_from_cache(spec.repo_id, "config.json", cache_dir=hub_cache, revision=spec.revision)
    if isinstance(config, str) and hf_weights.weights_file(os.path.dirname(config)):
        return os.path.dirname(config)
    raise UserError(
        f"--encoder {encoder} needs the network: {offline}, and the encoder cache "
        f"{hub_cache} holds no copy of {spec.repo_id} at {spec.revision or 'its default branch'}. "
        "Run once where the Hub is reachable with the same --cache-dir (or VBT_CACHE_DIR), or "
        "download the repository's files and pass their directory as --encoder."
    )


def _wanted_files(files: list[str], encoder: str, spec: RepoSpec) -> list[str]:
    """The settings files present and the one weight file to read; UserErrors for a repository
    the native encoder cannot use."""
    weights = next((name for name in hf_weights.WEIGHT_FILES if name in files), None)
    if weights is None:
        if hf_weights.PYTORCH_FILE in files:
            raise UserError(f"--encoder {encoder}: " + hf_weights.pytorch_only_message(spec.repo_id, spec.repo_id))
        raise UserError(
            f"--encoder {encoder}: {spec.repo_id} holds no "
            f"{' or '.join(hf_weights.WEIGHT_FILES)}: not a BERT-family checkpoint "
            "the native encoder reads"
        )
    if "config.json" not in files:
        raise UserError(
            f"--encoder {encoder}: {spec.repo_id} has no config.json (the native "
            "encoder reads the architecture from it)"
        )
    wanted = (*_SETTINGS_FILES, *families.TOKENIZER_FILES)
    return [weights, *(name for name in wanted if name in files)]


def _user_error(error: Exception, encoder: str, spec: RepoSpec) -> UserError:
    """One line naming `--encoder` and what to do, for each way a download fails."""
    from huggingface_hub import errors

    if isinstance(error, errors.GatedRepoError):
        return UserError(
            f"--encoder {encoder}: {spec.repo_id} is gated: accept its conditions "
            "on its Hub page, then set HF_TOKEN to an access token of that account"
        )
    if isinstance(error, errors.RepositoryNotFoundError):
        return UserError(
            f"--encoder {encoder}: no model repository {spec.repo_id} on the Hub "
            "(a private one needs HF_TOKEN set to an access token that can read it)"
        )
    if isinstance(error, errors.RevisionNotFoundError):
        return UserError(
            f"--encoder {encoder}: {spec.repo_id} has no revision {spec.revision} "
            "(give a branch, tag or commit sha it has)"
        )
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    revision = spec.revision or "its default branch"
    return UserError(
        f"--encoder {encoder}: downloading {spec.repo_id} at {revision} failed "
        f"({detail}); retry, or download the repository's files and pass their "
        "directory as --encoder."
    )
