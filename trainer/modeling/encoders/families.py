"""Which encoder family a checkpoint is, decided in one place: its config.json's model_type.

Every other module asks this one (`family_of`, `of_config`), so adding a family is one module
under models/ (its `Family` record) and its line in `_FAMILIES` here.
"""

from trainer.errors import UserError
from trainer.modeling.encoders.models import Family, bert, deberta_v2, distilbert, modernbert, mpnet, roberta

# The registry: every family's record, in the order errors list them.
_FAMILIES = (
    bert.FAMILY,
    mpnet.FAMILY,
    roberta.ROBERTA,
    roberta.XLM_ROBERTA,
    modernbert.FAMILY,
    deberta_v2.FAMILY,
    distilbert.FAMILY,
)
BY_MODEL_TYPE: dict[str, Family] = {model_type: family for family in _FAMILIES for model_type in family.model_types}
SUPPORTED = tuple(BY_MODEL_TYPE)
# Every family's tokenizer files: what an hf: download fetches besides config and weights.
TOKENIZER_FILES = tuple(dict.fromkeys(name for family in _FAMILIES for name in family.tokenizer_files))
# Every Hugging Face prefix of an encoder inside a task model ("roberta." in RobertaForMaskedLM).
WEIGHT_PREFIXES = tuple(prefix for family in _FAMILIES for prefix in family.weight_prefixes)


def described(which=lambda family: True) -> str:
    """The registered families `which` accepts as help texts and errors name them, with the
    config.json model_type values each reads: "BERT (bert, electra), MPNet (mpnet), ..."."""
    names = [f"{family.name} ({', '.join(family.model_types)})" for family in _FAMILIES if which(family)]
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


def of_config(config) -> Family:
    """The family of a built network's config (`network.encoder_config`)."""
    return BY_MODEL_TYPE[config.family]


def build(config, dtype=None):
    """The network of `config`, under the global policy or `dtype` (exports pass float32)."""
    return of_config(config).build(config, dtype=dtype)


def family_of(raw_config: dict, path: str) -> Family:
    """The family of a parsed config.json (BERT when it names none, as Google's configs do)."""
    model_type = raw_config.get("model_type", "bert")
    family = BY_MODEL_TYPE.get(model_type)
    if family is None:
        raise UserError(
            f"--encoder: {path} describes a {model_type} model; the native backend reads "
            f"model_type {', '.join(SUPPORTED)}. For other architectures pass a TF-Hub "
            "SavedModel with --encoder-backend hub."
        )
    return family
