"""Options the ``claimlog`` command refuses before it touches a server: each refusal says what is wrong and
what to type instead, never a library's message or a link to its documentation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from events import Actor
from services.cli import app
from services.cli.errors import validation_problems


def refused(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert "pydantic" not in result.output and "Traceback" not in result.output
    return " ".join(result.output.replace("│", " ").split())


def test_a_model_actor_without_its_model_is_told_to_add_model_with_an_example():
    said = refused("actors", "add", "drafter", "--kind", "model")
    assert "a model actor names its model: add --model" in said
    assert "claimlog actors add drafter --kind model --model" in said


def test_a_model_name_for_a_person_is_told_to_drop_it():
    said = refused("actors", "add", "ada", "--model", "gpt")
    assert "drop --model, or add --kind model" in said


def test_an_unknown_kind_lists_the_kinds():
    said = refused("actors", "add", "ada", "--kind", "robot")
    assert "'person', 'model', 'service'" in said


def test_validation_problems_name_each_field_and_what_was_given():
    with pytest.raises(ValidationError) as caught:
        Actor(id="ada", kind="robot")
    assert validation_problems(caught.value).startswith("kind: Input should be 'person', 'model' or 'service' (given 'robot')")
