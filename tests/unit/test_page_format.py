"""The registry page format: the real samples parsed and rendered back, and each error naming its line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.ingest.page_format import (
    PageFormatError,
    PageRelated,
    PageSource,
    RegistryPage,
    caveats,
    parse_page,
    render_page,
)

SAMPLES = Path(__file__).resolve().parents[2] / "services/ingest/samples"
SAMPLE_NAMES = ("CLM-0338.txt", "CLM-0501.txt", "CLM-0631.txt")


def sample(name: str = "CLM-0338.txt") -> str:
    return (SAMPLES / name).read_bytes().decode("utf-8")


def with_line(text: str, number: int, replacement: str | None) -> str:
    """The text with its 1-based line `number` replaced, or removed when the replacement is None."""
    lines = text.split("\n")
    lines[number - 1 : number] = [] if replacement is None else [replacement]
    return "\n".join(lines)


# --- the sample CLM-0338, field by field -------------------------------------------------------

def test_the_first_line_gives_slug_claim_id_and_the_statement_glued_to_the_id():
    page = parse_page(sample(), "CLM-0338.txt")
    assert page.path == "CLM-0338.txt"
    assert page.slug == "1-5b-7b-qwen2-5-backbones-trained-rl-multi-hop-retrieval"
    assert page.claim_id == "CLM-0338"
    assert page.statement == (
        "For 1.5B-7B Qwen2.5 backbones trained with RL on multi-hop retrieval QA, giving the policy "
        "reversible memory operations (summary, backtrack over a stack) with per-action process rewards "
        "raises F1 over trajectory-reward agentic-RAG baselines, and removing the two memory actions costs "
        "more than removing the planning action."
    )
    assert page.capability == "Carrying a chain of inference through to its conclusion"


def test_observed_on_drops_the_period_the_page_appends():
    assert parse_page(sample()).observed_on == (
        "Qwen2.5 1.5B/3B/7B trained on filtered HotpotQA and 2WikiMultiHopQA; evaluated on multi-hop, "
        "open-domain and agentic QA with a Wikipedia search tool; F1 only."
    )
    assert parse_page(sample("CLM-0501.txt")).observed_on.endswith("on 1.7B-4B Qwen3 models on syn")


def test_a_source_splits_measured_from_breadth_at_the_first_double_period_and_notes_truncation():
    (source,) = parse_page(sample()).sources
    assert source == PageSource(
        relation="validates",
        measured=(
            "F1 on seven QA benchmarks against No-RAG, naive RAG, agentic RAG and RL baselines "
            "(ReSearch, Search-R1, AEPO, ARPO, Mem1); average 33.55 vs 30.16 best baseline at 3B; "
            "ablations drop average to 27.37 without memory actions, 25.43 without rejection, "
            "19.94 without both process rewards."
        ),
        breadth=(
            "Measured across three model sizes, seven benchmarks, with component, reward and "
            "leave-one-action-out ablations."
        ),
        truncated=True,
        line=6,
    )


def test_a_source_without_the_truncation_marker_is_whole():
    (source,) = parse_page(sample("CLM-0631.txt")).sources
    assert source.truncated is False
    assert source.measured.endswith("under the same optimization scheme.")
    assert source.breadth is not None and source.breadth.startswith("one ablation table")
    assert source.breadth.endswith("No compute-matching discussion and no replication at 1.5B.")


def test_related_claims_split_the_capability_off_after_the_last_sentence_end():
    related = parse_page(sample()).related
    assert [r.line for r in related] == [9, 10, 11, 12, 13]
    assert [r.capability for r in related] == [
        "Completing tasks that take many steps or many hours",
        "Completing tasks that take many steps or many hours",
        "Losing information in long inputs",
        "Turning plans into physical action",
        "Getting more from several models than from one",
    ]
    assert {r.review_label for r in related} == {"reviewed by AI"}
    assert [r.statement[:40] for r in related] == [
        "When training an LLM with policy-gradien",
        "When training 4B-8B Qwen3 agents with gr",
        "For multi-hop QA over 28k-896k token hay",
        "For real-world online RL post-training o",
        "When RL-training a central-agent multi-a",
    ]
    assert related[0].statement.endswith("sparse reward gives no gradient at all.")
    assert related[1].statement.endswith("whether the request is answerable at all.")
    assert related[2].statement.endswith("while losing to it in-distribution.")
    assert related[3].statement.endswith("behavior-cloning regularization alone does not stop.")
    assert related[4].statement.endswith("accuracy 42.88 vs 40.49 at 3B).")


def test_the_notes_give_drafted_confidence_falsifier_and_that_the_page_is_unreviewed():
    page = parse_page(sample())
    assert page.drafted_confidence == "low"
    assert page.falsifier == (
        "An implementation where adding reversible memory actions and action-level process rewards gives no "
        "F1 gain over the same RL setup with append-only think/search actions and outcome-only rewards, on "
        "the same backbones and benchmarks."
    )
    assert page.reviewed is False
    assert parse_page(sample("CLM-0501.txt")).drafted_confidence == "medium"


# --- round trips and tolerated variations ------------------------------------------------------

@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_every_sample_renders_back_byte_for_byte(name):
    text = sample(name)
    assert render_page(parse_page(text, name)) == text


def test_a_trailing_newline_and_windows_line_endings_are_accepted_but_not_rendered():
    text = sample()
    for variant in (text + "\n", text.replace("\n", "\r\n"), text.replace("\n", "\r\n") + "\r\n"):
        assert parse_page(variant) == parse_page(text)
        assert render_page(parse_page(variant)) == text


def test_a_source_without_a_double_period_is_all_measured_and_has_no_breadth():
    text = with_line(sample(), 6, "- Supported by: F1 only.. [truncated]\n- Mentioned by: in passing.")
    first, second = parse_page(text).sources
    assert first == PageSource("supports", "F1 only.", None, truncated=True, line=6)
    assert second == PageSource("mentions", "in passing", None, truncated=False, line=7)
    assert render_page(parse_page(text)) == text


def test_sections_may_have_no_items_and_notes_may_say_nothing():
    lines = sample().split("\n")
    text = "\n".join(lines[:5] + lines[6:8] + ["Notes"])
    page = parse_page(text)
    assert (page.sources, page.related) == ((), ())
    assert (page.drafted_confidence, page.falsifier, page.reviewed) == (None, None, True)
    assert render_page(page) == text


def test_the_invitation_line_may_be_missing():
    assert parse_page(with_line(sample(), 7, None)).related[0].line == 8


def test_a_related_claim_may_have_no_review_label():
    text = with_line(sample(), 9, "- Models can plan!Planning ahead · ")
    assert parse_page(text).related[0] == PageRelated("Models can plan!", "Planning ahead", None, 9)
    assert render_page(parse_page(text)) == text


# --- errors name the line and the problem ------------------------------------------------------

ERRORS = {
    "empty file": ("", 1, "empty file"),
    "only a newline": ("\r\n", 1, "empty file"),
    "no claim id": (with_line(sample(), 1, "some-slug For 1.5B models, X."), 1, "expected a claim id"),
    "no space after the slug": (with_line(sample(), 1, "some-slugCLM-0338For X."), 1, "expected a slug"),
    "claim id with a letter": (with_line(sample(), 1, "a-slug CLM-03x8For X."), 1, 'found "CLM-03x8For X."'),
    "claim id lowercase": (with_line(sample(), 1, "some-slug clm-0338For X."), 1, "expected a claim id"),
    "claim id too long": (with_line(sample(), 1, "a CLM-1234567890123For X."), 1, "4 to 12 digits"),
    "slug with capitals": (with_line(sample(), 1, "Some-Slug CLM-0338For X."), 1, 'found "Some-Slug"'),
    "slug too long": (with_line(sample(), 1, "a" * 201 + " CLM-0338For X."), 1, "expected a slug"),
    "empty statement": (with_line(sample(), 1, "some-slug CLM-0338"), 1, "expected a statement"),
    "blank statement": (with_line(sample(), 1, "some-slug CLM-0338   "), 1, "expected a statement"),
    "misspelled capability": (
        with_line(sample(), 2, "Capabilty: Carrying a chain of inference through to its conclusion"),
        2, 'expected "Capability: <capability>", found "Capabilty: Carrying a chain of inference...',
    ),
    "empty capability": (with_line(sample(), 2, "Capability: "), 2, "expected a capability"),
    "capability without its colon": (with_line(sample(), 2, "Capability"), 2, 'found "Capability"'),
    "capability twice": (with_line(sample(), 3, "Capability: Again"), 3, "out of order"),
    "missing observed on": (with_line(sample(), 3, None), 3, 'expected "Observed on", found "Qwen2.5'),
    "misspelled observed on": (with_line(sample(), 3, "Observed"), 3, 'found "Observed"'),
    "observed text without its period": (with_line(sample(), 4, "on syn"), 4, 'the "." the page appends'),
    "observed text missing": (with_line(sample(), 4, None), 4, 'found "Sources"'),
    "misspelled sources": (with_line(sample(), 5, "Source"), 5, 'expected "Sources", found "Source"'),
    "sections out of order": (with_line(sample(), 3, "Sources"), 3, "out of order"),
    "unknown relation": (with_line(sample(), 6, "- Refuted by: F1 drops.. Broad."), 6, 'found "Refuted by"'),
    "source without relation": (with_line(sample(), 6, "- F1 drops."), 6, "expected a source"),
    "source without its period": (with_line(sample(), 6, "- Supported by: F1 drops"), 6, "measured text"),
    "missing related claims": (with_line(sample(), 8, None), 8, 'expected "Related claims"'),
    "related without separator": (
        with_line(sample(), 9, "- Models plan.Planning reviewed by AI"), 9, 'with no "·"',
    ),
    "related without a capability": (
        with_line(sample(), 10, "- Models plan.planning ahead · reviewed by AI"), 10, "capability",
    ),
    "related statement without sentence end": (
        with_line(sample(), 11, "- Models plan Planning ahead · reviewed by AI"), 11, "capability",
    ),
    "misspelled notes": (with_line(sample(), 14, "Note"), 14, 'expected "Notes", found "Note"'),
    "file cut short": ("\n".join(sample().split("\n")[:5]), 6, "found the end of the file"),
    "confidence outside the scale": (
        sample().replace("Drafted confidence: low.", "Drafted confidence: very high."), 15,
        'expected drafted confidence "low", "medium" or "high", found "very high"',
    ),
}


@pytest.mark.parametrize("text, line, problem", ERRORS.values(), ids=ERRORS.keys())
def test_each_format_error_names_its_line_and_the_problem(text, line, problem):
    with pytest.raises(PageFormatError) as caught:
        parse_page(text, "CLM-0338.txt")
    assert caught.value.line == line
    assert problem in caught.value.problem
    assert "expected" in caught.value.problem and "found" in caught.value.problem


def test_notes_placed_before_related_claims_are_reported_as_out_of_order():
    lines = sample().split("\n")
    text = "\n".join(lines[:7] + lines[13:] + lines[7:13])
    with pytest.raises(PageFormatError) as caught:
        parse_page(text)
    assert caught.value.line == 8
    assert caught.value.problem.startswith('expected "Related claims", found "Notes" (a section out of order')


def test_the_error_reads_path_line_problem_and_is_a_value_error():
    err = PageFormatError("CLM-0338.txt", 2, 'expected "Capability: <capability>", found "Capabilty: ..."')
    assert str(err) == 'CLM-0338.txt:2: expected "Capability: <capability>", found "Capabilty: ..."'
    assert isinstance(err, ValueError)
    assert (err.path, err.line) == ("CLM-0338.txt", 2)


# --- property: render then parse gives the page back -------------------------------------------

# Plain text: no control characters (the format is line based), no ".", "!", "?" (sentence ends decide
# where statements, measured texts and capabilities stop), no "·" or "[" (review and truncation markers).
_plain = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters=".!?·["), min_size=1, max_size=30
).filter(lambda s: s.strip())
# Caveats written "Measured: x" are read back as x (the label is the format's, not the caveats').
_caveats = _plain.filter(lambda s: not s.startswith("Measured"))
_ends = st.sampled_from([".", "!", "?", ".)", "!)"])


@st.composite
def pages(draw) -> RegistryPage:
    sources = draw(st.lists(st.tuples(
        st.sampled_from(["validates", "supports", "contradicts", "qualifies", "mentions"]),
        _plain, st.none() | _caveats, st.booleans()), max_size=3))
    related = draw(st.lists(st.tuples(
        _plain, _ends, st.from_regex(r"[A-Z]", fullmatch=True), _plain | st.just(""), st.none() | _plain
    ), max_size=3))
    first_related = 6 + len(sources) + 2
    return RegistryPage(
        path="<text>",
        claim_id=draw(st.from_regex(r"CLM-[0-9]{4,12}", fullmatch=True)),
        slug=draw(st.from_regex(r"[a-z0-9]{1,5}(-[a-z0-9]{1,5}){0,3}", fullmatch=True)),
        statement=draw(_plain.filter(lambda s: s[0] not in "0123456789")),
        capability=draw(_plain),
        observed_on=draw(_plain),
        sources=tuple(PageSource(rel, measured + ("." if breadth else ""), breadth, cut, 6 + i)
                      for i, (rel, measured, breadth, cut) in enumerate(sources)),
        related=tuple(PageRelated(stmt + end, cap + rest, label, first_related + i)
                      for i, (stmt, end, cap, rest, label) in enumerate(related)),
        drafted_confidence=draw(st.sampled_from([None, "low", "medium", "high"])),
        falsifier=draw(st.none() | _plain),
        reviewed=draw(st.booleans()),
    )


@given(pages())
def test_rendering_then_parsing_gives_back_the_same_page(page):
    """Holds for pages whose texts avoid what makes the format ambiguous.

    The generated texts are single-line; statements do not start with a digit (it would read as part of the
    claim id); measured texts end with "." exactly when a breadth follows and hold no other "."; capabilities
    start with a capital and hold no ".", "!" or "?"; labels hold no "·"; nothing holds "[" (the truncation
    marker); empty labels and falsifiers are written as None.
    """
    text = render_page(page)
    assert parse_page(text) == page
    assert render_page(parse_page(text + "\n")) == text


def test_caveats_entered_alone_are_labelled_apart_from_the_result():
    page = parse_page(sample("CLM-0631.txt"))
    source = page.sources[0]
    entered = PageSource(source.relation, source.measured, "one seed, simulator only", False, 6)
    text = render_page(replace(page, sources=(entered,)))
    assert "under the same optimization scheme.. Measured: one seed, simulator only" in text
    assert parse_page(text).sources[0].breadth == "one seed, simulator only"


def test_caveats_that_are_a_sentence_of_their_own_keep_their_words():
    assert caveats("Measured across three sizes.") == ("Measured", "across three sizes.")
    assert caveats("Measured: one seed.") == ("Measured:", "one seed.")
    assert caveats("one seed.") == ("Measured:", "one seed.")


def test_caveats_keep_their_own_leading_space():
    page = parse_page(sample("CLM-0631.txt"))
    source = replace(page.sources[0], breadth=" 0")
    assert parse_page(render_page(replace(page, sources=(source,)))).sources[0].breadth == " 0"
