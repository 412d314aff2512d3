"""The log's layout: what producers publish, what the stream stores, and how readers find a claim or a partition."""

from __future__ import annotations

import pytest

from events.subjects import (
    LogLayout,
    claim_and_type,
    claim_of,
    exported_subject,
    partition_of_token,
    read_transform,
)


def test_the_partition_is_fnv1a_32_of_the_claim_token_modulo_n():
    # Reference values of FNV-1a 32: "" -> 0x811c9dc5, "a" -> 0xe40c292c, "foobar" -> 0xbf9cf968.
    assert partition_of_token("", 2**31) == 0x811C9DC5 % 2**31
    assert partition_of_token("a", 1000) == 0xE40C292C % 1000
    assert partition_of_token("foobar", 7) == 0xBF9CF968 % 7


def test_a_partitioned_layout_publishes_plain_subjects_and_stores_them_in_the_claims_partition():
    layout = LogLayout("claims", 16)
    p = layout.partition_of("CLM-0338")
    assert layout.publish_subject("CLM-0338", "ClaimDrafted") == "claims.CLM-0338.ClaimDrafted"
    assert layout.stored_subject("CLM-0338", "ClaimDrafted") == f"claims.{p}.CLM-0338.ClaimDrafted"
    assert layout.stream_subjects == ["claims.*.*"]
    assert layout.transform == ("claims.*.*", "claims.{{partition(16,1)}}.{{wildcard(1)}}.{{wildcard(2)}}")
    assert layout.claim_filter("CLM-0338") == "claims.*.CLM-0338.*"
    assert layout.partition_filter(3) == "claims.3.*.*"
    assert layout.parse(f"claims.{p}.CLM-0338.ClaimDrafted") == (p, "CLM-0338", "ClaimDrafted")
    assert layout.claim_of(f"claims.{p}.CLM-0338.ClaimDrafted") == "CLM-0338"


def test_an_unpartitioned_layout_stores_what_was_published():
    layout = LogLayout("claims", 0)
    assert layout.stored_subject("CLM-0338", "ClaimDrafted") == "claims.CLM-0338.ClaimDrafted"
    assert layout.stream_subjects == ["claims.>"] and layout.transform is None
    assert layout.claim_filter("CLM-0338") == "claims.CLM-0338.*"
    assert layout.parse("claims.CLM-0338.ClaimDrafted") == (0, "CLM-0338", "ClaimDrafted")


@pytest.mark.parametrize(
    ("subject", "reason"),
    [("claims.CLM-1.ClaimDrafted", "claims.<partition>"), ("other.3.CLM-1.ClaimDrafted", "is not"), ("claims.x.CLM-1.T", "is not")],
)
def test_a_stored_subject_of_another_shape_is_refused_with_the_shape_expected(subject: str, reason: str):
    with pytest.raises(ValueError, match=reason):
        LogLayout("claims", 16).parse(subject)


def test_a_bad_prefix_or_number_of_partitions_is_refused():
    with pytest.raises(ValueError, match="one token"):
        LogLayout("claims.eu", 16)
    with pytest.raises(ValueError, match="0 \\(unpartitioned\\) to 1024"):
        LogLayout("claims", 5000)
    with pytest.raises(ValueError, match="partition 16"):
        LogLayout("claims", 16).partition_filter(16)


def test_the_partitions_are_read_back_from_the_streams_transform():
    source, destination = LogLayout("reg2", 8).transform
    assert read_transform("reg2", source, destination) == 8
    assert read_transform("reg2", None, None) == 0
    with pytest.raises(ValueError, match="not claimlog's partitioning"):
        read_transform("reg2", "reg2.*.*", "reg2.{{wildcard(2)}}.{{wildcard(1)}}")


def test_an_exported_subject_of_either_layout_and_any_prefix_names_its_claim_and_type():
    assert exported_subject("claims.CLM-1.ClaimDrafted") == ("CLM-1", "ClaimDrafted")
    assert exported_subject("reg2.5.CLM-1.ClaimDrafted") == ("CLM-1", "ClaimDrafted")
    assert claim_of("reg2.5.CLM-1.ClaimDrafted") == claim_of("claims.CLM-1.ClaimDrafted") == "CLM-1"
    with pytest.raises(ValueError, match="is not"):
        exported_subject("claims.CLM-1")
    with pytest.raises(ValueError, match="is not"):
        exported_subject("claims.p1.CLM-1.ClaimDrafted")


def test_every_reader_of_a_stored_subject_names_the_same_claim_and_type():
    for subject in ("claims.CLM-1.ClaimDrafted", "reg2.5.CLM-1.ClaimDrafted"):
        assert claim_and_type(subject) == exported_subject(subject) == ("CLM-1", "ClaimDrafted")
        assert claim_of(subject) == "CLM-1"
    assert claim_and_type("odd") == ("odd", "odd") and claim_of("a.b") == "a.b"
