"""The private parts of pydantic that a bulk ingest's event assembly relies on are still there, as they were.

``services/ingest/bulk_events.py`` makes an event as ``BaseModel.model_construct`` makes one: object's
``__new__``, then the four slots a model instance keeps (``__dict__``, ``__pydantic_fields_set__``,
``__pydantic_extra__``, ``__pydantic_private__``), for event classes that ``__pydantic_decorators__``
says have no validator of their own. pyproject.toml pins pydantic to the minor release these checks were
written against; a release that renames or reshapes any of them fails here, before an event is assembled
wrong. ``tests/unit/test_bulk_events.py`` holds the assembled events equal to the validated ones.
"""

from __future__ import annotations

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Annotated

import pytest
from packaging.requirements import Requirement
from pydantic import AfterValidator, BaseModel, field_validator, model_validator

from events import EVENT_TYPES
from services.ingest.bulk_events import _TEMPLATES, has_own_validators

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_pydantic_is_within_the_pinned_range():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(Requirement(line) for line in dependencies if Requirement(line).name == "pydantic")
    bounds = [spec for spec in pin.specifier if spec.operator == "<"]
    assert bounds, "pydantic needs an upper bound"
    assert all(spec.version.count(".") == 1 and not spec.version.startswith("3") for spec in bounds), (
        f"pydantic's upper bound {pin.specifier} should be the next minor release: the internals change between minors"
    )
    assert version("pydantic") in pin.specifier


def test_a_model_instance_keeps_exactly_four_slots():
    assert BaseModel.__slots__ == ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")


def test_model_construct_makes_a_model_with_objects_new_and_sets_those_four_slots():
    assert "__new__" not in vars(BaseModel)
    source = inspect.getsource(BaseModel.model_construct)
    assert "m = cls.__new__(cls)" in source
    for setting in (
        "_object_setattr(m, '__dict__', fields_values)",
        "_object_setattr(m, '__pydantic_fields_set__', _fields_set)",
        "_object_setattr(m, '__pydantic_extra__', _extra)",
        "_object_setattr(m, '__pydantic_private__', None)",
    ):
        assert setting in source, f"model_construct no longer does {setting}"


def test_validators_of_a_model_are_found_in_its_decorators():
    class Plain(BaseModel):
        text: Annotated[str, AfterValidator(str.strip)]  # checked by the command too: not the event's own

    class OverOneField(BaseModel):
        text: str

        @field_validator("text")
        @classmethod
        def stripped(cls, value: str) -> str:
            return value.strip()

    class OverTheModel(BaseModel):
        text: str

        @model_validator(mode="after")
        def said(self):
            return self

    assert not has_own_validators(Plain)
    assert has_own_validators(OverOneField)
    assert has_own_validators(OverTheModel)


def test_events_with_a_validator_of_their_own_are_never_assembled():
    with_validators = {cls for cls in EVENT_TYPES.values() if has_own_validators(cls)}
    assert {cls.__name__ for cls in with_validators} >= {"ClaimRevised", "SourceCorrected", "ClaimsRelated"}
    assert not with_validators & set(_TEMPLATES)


@pytest.mark.parametrize("cls", sorted(_TEMPLATES, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_an_assembled_event_class_keeps_nothing_beyond_its_fields(cls):
    assert cls.__new__ is object.__new__
    assert cls.model_config.get("extra") == "forbid"  # __pydantic_extra__ stays None
    assert cls.__private_attributes__ == {}  # __pydantic_private__ stays None
    assert cls.__pydantic_post_init__ is None  # nothing model_construct would run after
    assert not cls.__pydantic_root_model__
    assert cls.model_config.get("frozen") is True

