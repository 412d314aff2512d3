"""The scorecard as a chart people can read without a script: one horizontal bar per capability (or
technique), split by standing, with the unreviewed model drafts left out drawn apart, laid out here and
drawn as inline SVG by templates/scorecard.html."""

from __future__ import annotations

from dataclasses import dataclass

from projections.scorecard import STANDINGS
from services.read_api.aggregates import Standing

WIDTH = 720
BARS_WIDTH = 480  # the longest bar; the rest of the row holds its numbers
BAR_HEIGHT = 22
ROW_HEIGHT = 58  # a label line above each bar, and room below it
LEGEND_HEIGHT = 56
GAP = 6  # between the claims that count and the drafts left out
FILLS = {
    "validated": "#1b7a3d",
    "supported": "#74b765",
    "contested": "#d08c00",
    "refuted": "#c2362b",
    "untested": "#8d939a",
}
LEFT_OUT = "left-out"
LEFT_OUT_LABEL = "unreviewed model drafts left out"


@dataclass(frozen=True)
class Segment:
    """A part of a bar: claims of one standing (or the drafts left out), where it is drawn."""

    name: str
    claims: int
    x: float
    width: float

    @property
    def fill(self) -> str:
        return FILLS.get(self.name, "url(#left-out-hatch)")

    @property
    def label(self) -> str:
        return self.name if self.name in FILLS else LEFT_OUT_LABEL


@dataclass(frozen=True)
class Bar:
    """One capability's (or technique's) bar: its label and link, where it sits, its parts and totals."""

    label: str
    href: str
    y: float
    segments: list[Segment]
    counted: int
    left_out: int
    end: float  # where the bar ends, for the totals written after it


@dataclass(frozen=True)
class Chart:
    """Everything the template needs to draw the chart."""

    width: int
    height: int
    bar_height: int
    bars: list[Bar]
    legend: list[tuple[str, str]]  # (label, fill)


def scorecard_chart(rows: list[tuple[str, str, Standing]]) -> Chart:
    """The chart of ``rows`` (label, link, score), in their order, on one scale."""
    longest = max((score.claims_counted + score.unreviewed_model_drafts_left_out for *_, score in rows), default=0)
    scale = BARS_WIDTH / max(longest, 1)
    bars = [
        _bar(label, href, score, y=LEGEND_HEIGHT + i * ROW_HEIGHT, scale=scale)
        for i, (label, href, score) in enumerate(rows)
    ]
    legend = [(standing, FILLS[standing]) for standing in STANDINGS] + [(LEFT_OUT_LABEL, "url(#left-out-hatch)")]
    return Chart(WIDTH, LEGEND_HEIGHT + ROW_HEIGHT * len(rows), BAR_HEIGHT, bars, legend)


def _bar(label: str, href: str, score: Standing, *, y: float, scale: float) -> Bar:
    segments, x = [], 0.0
    for standing in STANDINGS:
        claims = score.by_standing.get(standing, 0)
        if claims:
            segments.append(Segment(standing, claims, x, claims * scale))
            x += claims * scale
    left_out = score.unreviewed_model_drafts_left_out
    if left_out:
        x += GAP if x else 0
        segments.append(Segment(LEFT_OUT, left_out, x, left_out * scale))
        x += left_out * scale
    return Bar(label, href, y, segments, score.claims_counted, left_out, x)
