"""Loaded by the Schemathesis run of ``test_schemathesis.py`` (``SCHEMATHESIS_HOOKS``).

Schemathesis's ``positive_data_acceptance`` (ST202) fails a schema-valid request answered 400 or 422. Some
such answers are the API's decisions, which no schema can say and which the OpenAPI document lists by
reason: on what the log holds (a command's rule refusing the claim's state, such as a revision it does not
have; ``422 idempotency_key_reused`` for a key already used for another command; ``422 beyond_log_head``
for ``after`` past the head; ``400 bad_cursor`` for a cursor the API never returned), on a pair of
parameters OpenAPI cannot tie (``400 bad_as_of`` for ``as_of_seq`` with ``as_of``, ``400 bad_sort`` for
``sort=relevance`` without ``q``), or on the database's own word splitting (``400 bad_query``: a ``q``
with no word). ``positive_data_decided`` is Schemathesis's own check with those let through; the run uses
it in place of ST202. A request refused for its form (``invalid_request``, ``duplicate_key``, any other
reason of a read) still fails it.
"""

from __future__ import annotations

import json

import schemathesis
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

# A command's refusals for its form; any other 422 of a command is a rule's decision (docs/commands.md).
MALFORMED_COMMAND = frozenset({"invalid_request", "duplicate_key", "http_error", "bad_if_match", "bad_character"})
DECIDED_READ = frozenset({"beyond_log_head", "bad_cursor", "bad_query"})


def _decided(response, case) -> bool:
    try:
        error = json.loads(response.content).get("error")
    except (ValueError, AttributeError):
        return False
    if case.path.startswith("/commands"):
        return response.status_code == 422 and error not in MALFORMED_COMMAND
    query = set(case.query or {})
    if error in DECIDED_READ:
        return True
    if error == "bad_as_of":
        return {"as_of_seq", "as_of"} <= query
    return error == "bad_sort" and "q" not in query


@schemathesis.check
def positive_data_decided(ctx, response, case):
    """ST202, except for the decisions above."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        if _decided(response, case):
            return None
        raise
