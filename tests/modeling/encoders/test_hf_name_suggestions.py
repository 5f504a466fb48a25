"""`--encoder hf:NAME` without an organisation, where NAME is a registered encoder or the name of
the Hub repository one is registered for: the error names the --encoder values that mean it
(issue #49)."""

import pytest

from trainer.errors import UserError
from trainer.modeling import encoders
from trainer.modeling.encoders import registry


def error_of(call, *args) -> str:
    with pytest.raises(UserError) as raised:
        call(*args)
    return str(raised.value)


def test_a_registered_name_is_answered_with_it_and_its_hub_repository():
    assert error_of(encoders.check_encoder, "hf:xlm-roberta-base") == (
        "--encoder hf:xlm-roberta-base: a Hugging Face repository is hf:ORG/NAME; "
        "xlm-roberta-base is a registered encoder: use --encoder xlm-roberta-base or "
        "--encoder hf:FacebookAI/xlm-roberta-base"
    )


def test_the_repositorys_own_spelling_and_a_revision_are_understood_when_loading(tmp_path):
    """Resolved before any download: no network is asked."""
    assert error_of(registry.resolve, "hf:ModernBERT-base@v1", str(tmp_path)) == (
        "--encoder hf:ModernBERT-base@v1: a Hugging Face repository is hf:ORG/NAME; "
        "modernbert-base is a registered encoder: use --encoder modernbert-base or "
        "--encoder hf:answerdotai/ModernBERT-base@v1"
    )


def test_a_registered_name_the_hub_does_not_serve_is_answered_with_the_name_alone():
    assert error_of(encoders.check_encoder, "hf:bert-base-uncased") == (
        "--encoder hf:bert-base-uncased: a Hugging Face repository is hf:ORG/NAME; "
        "bert-base-uncased is a registered encoder: use --encoder bert-base-uncased"
    )
