"""Options the ``claimlog`` command refuses before it touches a server: each refusal says what is wrong and
what to type instead, never a library's message or a link to its documentation."""

from __future__ import annotations

import os
import subprocess
import sys

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


def test_an_unknown_kind_lists_the_kinds_in_plain_words():
    said = refused("actors", "add", "ada", "--kind", "robot")
    assert "'--kind': 'robot' is not one of 'person', 'model', 'service': give one of them" in said
    assert "Value error" not in said
    assert "'--actor-kind': 'robot' is not one of" in refused("history", "CLM-0338", "--actor-kind", "robot")


def test_a_sequence_that_is_not_a_number_is_told_to_be_written_in_digits():
    said = refused("show", "CLM-0338", "--as-of-seq", "abc")
    assert "'--as-of-seq': 'abc' is not a whole number: write it in digits, e.g. 27" in said
    assert "Input should be" not in said and "unable to parse" not in said


def test_validation_problems_name_each_field_and_what_was_given():
    with pytest.raises(ValidationError) as caught:
        Actor(id="ada", kind="robot")
    assert validation_problems(caught.value).startswith("kind: Input should be 'person', 'model' or 'service' (given 'robot')")


def test_an_actor_id_with_a_space_is_told_which_characters_an_id_takes_with_one_that_would_do():
    said = refused("actors", "add", "ada lovelace")
    assert "letters, digits and . _ @ + - only (no spaces)" in said and "claimlog actors add ada-lovelace" in said
    assert "pattern" not in said


def test_revoke_without_whom_or_with_both_says_what_each_form_does():
    assert "claimlog actors revoke ada), or one token (claimlog actors revoke --token TOKEN_ID" in refused("actors", "revoke")
    said = refused("actors", "revoke", "ada", "--token", "abc123")
    assert "not both: claimlog actors revoke ada revokes every token of ada, claimlog actors revoke --token abc123 only" in said


def test_an_expiry_that_does_not_read_is_refused_with_the_forms_that_do():
    said = refused("actors", "add", "ada", "--expires-in", "90 days")
    assert "--expires-in '90 days' is not a duration: a number and a unit, s m h d or w, e.g. 90d, 12h or 1d12h" in said
    assert "has no time zone: add one, e.g. --expires 2027-03-01T00:00:00Z" in refused("actors", "add", "ada", "--expires", "2027-03-01T00:00:00")
    assert "has already passed" in refused("actors", "add", "ada", "--expires", "2020-01-01T00:00:00Z")
    assert "give --expires-in 90d or --expires 2027-03-01T00:00:00Z, not both" in refused(
        "actors", "add", "ada", "--expires-in", "90d", "--expires", "2027-03-01T00:00:00Z")
    assert "--grace 'soon' is not a duration" in refused("actors", "rotate", "ada", "--grace", "soon")
    assert "--expires-in '1y' is not a duration" in refused("actors", "rotate", "ada", "--expires-in", "1y")


def test_an_export_of_something_that_is_not_a_claim_id_is_refused_with_an_example():
    assert "'nope' is not a claim id: write it as CLM- and 4 to 12 digits, e.g. --claim CLM-0338" in refused("export", "--claim", "nope")


def test_out_of_range_numbers_are_refused_before_anything_starts():
    assert "'--after': -5 is out of range: give 0 or more" in refused("unreadable", "--after", "-5")
    assert "'--port': 99999 is out of range: give 65535 or less" in refused("api", "--port", "99999")


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("CLAIMLOG_PROJECTOR_BATCH", "0", "CLAIMLOG_PROJECTOR_BATCH='0': Input should be greater than or equal to 1; "
                                          "unset it for the default (1000)"),
        ("CLAIMLOG_API_PORT", "abc", "CLAIMLOG_API_PORT='abc': Input should be a valid integer"),
        ("CLAIMLOG_DATABASE_URL", "garbage", "CLAIMLOG_DATABASE_URL='garbage': not a database URL; write it as "
                                             "sqlite:///PATH or postgresql://USER@HOST:5432/DATABASE; or unset it"),
        ("CLAIMLOG_DATABASE_URL", "mysql://db/claims", "CLAIMLOG_DATABASE_URL='mysql://db/claims': claimlog keeps its "
                                                       "read models in SQLite or PostgreSQL, not mysql"),
    ],
)
def test_a_setting_that_does_not_read_names_the_variable_what_it_holds_and_what_to_do(variable, value, said, tmp_path):
    env = {**os.environ, variable: value, "CLAIMLOG_DATA_DIR": str(tmp_path), "COLUMNS": "250"}
    done = subprocess.run([sys.executable, "-m", "services.cli", "show", "CLM-0338"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "pydantic.dev" not in done.stderr, done.stderr
    assert f"error: the settings in the environment do not read: {said}" in " ".join(done.stderr.split())
    assert not any(tmp_path.iterdir())  # refused before anything was started or made
