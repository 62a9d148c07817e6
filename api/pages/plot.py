"""Geometry of the inline SVG drawn server-side (no script, no image request): the recall@10
history plot and the story time line. The templates draw it; text in it is escaped there."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from api.pages.evaluation import Series

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
WIDTH, HEIGHT, PAD = 640, 240, 40


@dataclass(frozen=True)
class Line:
    name: str
    color: str
    dashed: bool
    path: str  # "x,y x,y ..." for a polyline
    dots: tuple[tuple[float, float, str], ...]  # (x, y, tooltip)


def history_plot(series: list[Series], records: int) -> dict:
    """recall@10 (0-1, y) against the experiment number (x, 1 = the first record)."""
    span = max(records - 1, 1)

    def x(n: int) -> float:
        return round(PAD + (WIDTH - 2 * PAD) * (n / span if records > 1 else 0.5), 1)

    def y(value: float) -> float:
        return round(HEIGHT - PAD - (HEIGHT - 2 * PAD) * max(0.0, min(1.0, value)), 1)

    lines = []
    for i, one in enumerate(series):
        dots = tuple((x(n), y(v), f"{one.name}: experiment {n + 1}, recall@10 {v:.3f}") for n, v in one.points)
        lines.append(
            Line(
                one.name, COLORS[i % len(COLORS)], not one.per_chat, " ".join(f"{dx},{dy}" for dx, dy, _ in dots), dots
            )
        )
    step = max(1, records // 10)
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": PAD,
        "right": WIDTH - PAD,
        "top": PAD,
        "bottom": HEIGHT - PAD,
        "yticks": [(y(v / 4), f"{v / 4:.2f}") for v in range(5)],
        "xticks": [(x(n), str(n + 1)) for n in range(0, records, step)],
        "lines": lines,
    }


@dataclass(frozen=True)
class Band:
    index: int
    name: str
    x: float
    width: float
    color: str
    start: datetime
    end: datetime


def timeline(spans: list[tuple[str, datetime, datetime]]) -> dict:
    """Bands on a time axis, one per (name, first, last) phase; a phase of one moment gets a
    visible sliver."""
    if not spans:
        return {"width": WIDTH, "bands": [], "first": None, "last": None}
    first = min(s for _, s, _ in spans)
    last = max(e for _, _, e in spans)
    total = max((last - first).total_seconds(), 1.0)
    inner = WIDTH - 2 * PAD
    bands = []
    for i, (name, start, end) in enumerate(spans):
        left = PAD + inner * (start - first).total_seconds() / total
        width = max(inner * (end - start).total_seconds() / total, 6.0)
        bands.append(Band(i + 1, name, round(left, 1), round(width, 1), COLORS[i % len(COLORS)], start, end))
    return {"width": WIDTH, "bands": bands, "first": first, "last": last, "left": PAD, "right": WIDTH - PAD}
