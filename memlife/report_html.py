"""The run report page: one self-contained HTML file per run, beside its receipts.

What it shows: the headline figures (records, status, gate verdict, model usage), counts
by action and by namespace pattern, the top reason codes, what an apply run would change
(dry runs), and trends over the last N runs of the same mode, as inline SVG charts.
No script, no stylesheet or font from anywhere else: it opens from S3, a laptop or a
ticket attachment alike.

It holds no memory content: ids never appear either, only counts, codes and namespace
patterns (the actor id and session ids of a namespace become ``*``). Every string that does
appear (codes, patterns, run ids) is HTML-escaped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlife.would_change import would_change

if TYPE_CHECKING:
    from memlife.audit import ReceiptSink

TREND_RUNS = 14  # nights shown in the trend charts
TOP = 12  # rows in the namespace and reason charts

# one colour per action / outcome, reused by every chart and the legend
COLOURS = {
    "retain": "#4c9f70",
    "hold": "#8c6bb1",
    "delete_expired": "#d62728",
    "delete_pending": "#ff7f0e",
    "review": "#1f77b4",
    "consolidate_candidate": "#17becf",
    "supersede_candidate": "#bcbd22",
    "processed": "#555555",
    "retained": "#4c9f70",
    "consolidated": "#17becf",
    "superseded": "#bcbd22",
    "deleted": "#d62728",
    "quarantined": "#e377c2",
    "reviewed": "#1f77b4",
    "held": "#8c6bb1",
    "failed": "#000000",
    "delete": "#d62728",
    "left for review": "#1f77b4",
    "consolidate (groups)": "#17becf",
    "merge duplicates": "#9edae5",
    "supersede contradicted": "#bcbd22",
}
_FALLBACK = ("#7f7f7f", "#9edae5", "#c49c94", "#f7b6d2", "#dbdb8d", "#aec7e8")


def colour(name: str) -> str:
    return COLOURS.get(name) or _FALLBACK[sum(map(ord, name)) % len(_FALLBACK)]


@dataclass
class Breakdown:
    """What the proposed-actions report says, aggregated: no ids, no content."""

    by_namespace: dict[str, Counter[str]] = field(default_factory=dict)  # pattern -> actions
    reasons: Counter[str] = field(default_factory=Counter)


# a namespace segment after one of these names an actor or a session (AgentCore's
# ``/strategies/{strategyId}/actors/{actorId}/sessions/{sessionId}``): never shown
_ID_KEYS = frozenset({"actor", "actors", "actorid", "user", "users", "userid",
                      "session", "sessions", "sessionid"})  # fmt: skip


def namespace_pattern(actor_id: str, namespace: str) -> str:
    """``/users/u-1/prefs`` of actor ``u-1`` -> ``/users/*/prefs``: a pattern, not a person.

    The actor id is masked wherever it stands as whole segments, one or several (an
    AgentCore actor id may hold ``/``: ``acme/alice@example.com``), and so is the segment
    after an ``actors`` / ``users`` / ``sessions`` segment (a session id), and any segment
    after the actor's that holds a digit: AgentCore's ``/summaries/{actorId}/{sessionId}``
    names the session with no key before it, and each session was a row of its own."""
    parts = namespace.split("/")
    actor = actor_id.split("/") if actor_id else []
    out: list[str] = []
    after_actor = False
    i = 0
    while i < len(parts):
        if actor and any(actor) and parts[i : i + len(actor)] == actor:
            out.append("*")
            i += len(actor)
            after_actor = True
            continue
        masked = bool(out) and out[-1].lower().replace("_", "").replace("-", "") in _ID_KEYS
        masked = masked or (after_actor and any(ch.isdigit() for ch in parts[i]))
        out.append("*" if masked and parts[i] else parts[i])
        i += 1
    return "/".join(out)


def breakdown(report_parquet: str | Path | None, batch_rows: int = 65_536) -> Breakdown:
    """Counts by namespace pattern and action, and reason codes, from the run's Parquet.

    Read ``batch_rows`` rows at a time and aggregated in Arrow per batch (one row per
    actor/namespace/action), so 1M records cost one pass in C++ and a loop over shards, and
    memory stays flat: reading the whole table added ~280 MB at 1M to the run's peak.
    """
    out = Breakdown()
    if not report_parquet or not Path(report_parquet).exists():
        return out
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    columns = ["actor_id", "namespace", "action", "reasons"]
    keys = columns[:3]
    patterns: dict[tuple[str, str], str] = {}  # a shard has several actions: one split each
    with pq.ParquetFile(report_parquet) as source:
        for batch in source.iter_batches(batch_size=batch_rows, columns=columns, use_threads=False):
            table = pa.Table.from_batches([batch])
            grouped = table.group_by(keys).aggregate([([], "count_all")])
            for actor, ns, action, n in zip(
                *(grouped.column(c).to_pylist() for c in (*keys, "count_all")), strict=True
            ):
                pattern = patterns.get((actor, ns))
                if pattern is None:
                    if len(patterns) > 65_536:  # bounded: shards arrive in order
                        patterns.clear()
                    pattern = patterns[(actor, ns)] = namespace_pattern(actor, ns)
                out.by_namespace.setdefault(pattern, Counter())[action] += n
            for item in pc.value_counts(pc.list_flatten(table.column("reasons"))).to_pylist():
                out.reasons[item["values"]] += item["counts"]
    return out


def history(
    sink: ReceiptSink, mode: str, run_id: str, n: int = TREND_RUNS, store: str | None = None
) -> list[dict[str, Any]]:
    """The receipts of the last ``n`` runs of ``mode`` before ``run_id`` (oldest first), of
    ``store`` only where it is given: stores sharing one receipts sink each trend their
    own runs (a run whose manifest names no store, from before runs named it, counts)."""
    from memlife.review import run_info, run_prefixes

    prefixes = run_prefixes(sink.list("runs/"))  # in place only, as `receipts list` reads them
    out: list[dict[str, Any]] = []
    for prefix in reversed(prefixes):
        if prefix.rsplit("/", 1)[1] == run_id:
            continue
        run = run_info(sink, prefix)  # the manifest names the store, the receipt the rest
        receipt = run.receipt
        if receipt and receipt.get("mode") == mode and receipt.get("counts") and _counts(receipt):
            if store and run.store and run.store != store:
                continue
            out.append(receipt)
            if len(out) == n:
                break
    return list(reversed(out))


def _counts(receipt: Mapping[str, Any]) -> bool:
    """Every figure a trend draws is a count (a planted NaN, text or null is no run's)."""
    counts, planned = receipt.get("counts"), receipt.get("planned", {})
    if not isinstance(counts, dict) or not isinstance(planned, dict):
        return False
    values = [receipt.get("records_found", 0), *counts.values(), *planned.values()]
    return all(type(v) is int and v >= 0 for v in values)


# -- charts (inline SVG) -------------------------------------------------------------------


def bar_chart(rows: Sequence[tuple[str, int]], *, title: str, width: int = 560) -> str:
    """Horizontal bars, one per (label, value), coloured by label."""
    if not rows:
        return f'<figure><figcaption>{escape(title)}</figcaption><p class="none">none</p></figure>'
    label_w, bar_h, gap = 190, 18, 6
    top = max(v for _, v in rows) or 1
    height = len(rows) * (bar_h + gap)
    parts = [
        f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (label, value) in enumerate(rows):
        y = i * (bar_h + gap)
        w = max(1.0, (width - label_w - 70) * value / top) if value else 0
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end" class="l">{escape(label)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour(label)}">'
            f"<title>{escape(label)}: {value:,}</title></rect>"
            f'<text x="{label_w + w + 5:.1f}" y="{y + 13}" class="v">{value:,}</text>'
        )
    parts.append("</svg>")
    return f"<figure><figcaption>{escape(title)}</figcaption>{''.join(parts)}</figure>"


def stacked_chart(
    rows: Sequence[tuple[str, Mapping[str, int]]], *, title: str, width: int = 760
) -> str:
    """One horizontal stacked bar per row (e.g. a namespace pattern), segments by action."""
    if not rows:
        return f'<figure><figcaption>{escape(title)}</figcaption><p class="none">none</p></figure>'
    label_w, bar_h, gap = 260, 18, 6
    top = max(sum(c.values()) for _, c in rows) or 1
    height = len(rows) * (bar_h + gap)
    parts = [
        f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    keys = sorted({k for _, c in rows for k in c})
    for i, (label, counts) in enumerate(rows):
        y, x = i * (bar_h + gap), float(label_w)
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end" class="l">{escape(label)}</text>'
        )
        for k in keys:
            v = counts.get(k, 0)
            if not v:
                continue
            w = (width - label_w - 70) * v / top
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{max(w, 1):.1f}" height="{bar_h}" '
                f'fill="{colour(k)}"><title>{escape(label)} {escape(k)}: {v:,}</title></rect>'
            )
            x += w
        parts.append(
            f'<text x="{x + 5:.1f}" y="{y + 13}" class="v">{sum(counts.values()):,}</text>'
        )
    parts.append("</svg>")
    return (
        f"<figure><figcaption>{escape(title)}</figcaption>{''.join(parts)}{legend(keys)}</figure>"
    )


def trend_chart(
    labels: Sequence[str],
    series: Mapping[str, Sequence[int]],
    *,
    title: str,
    width: int = 760,
    height: int = 220,
) -> str:
    """Lines over runs (x: run cutoff dates), one per series, with the latest value marked."""
    if len(labels) < 2:
        return (
            f"<figure><figcaption>{escape(title)}</figcaption>"
            '<p class="none">trends appear after two runs</p></figure>'
        )
    left, right, top_pad, bottom = 50, 20, 10, 30
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    top = max((max(v) for v in series.values() if v), default=0) or 1
    step = plot_w / (len(labels) - 1)

    def xy(i: int, v: int) -> tuple[float, float]:
        return left + i * step, top_pad + plot_h * (1 - v / top)

    parts = [
        f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{width - right}" y2="{top_pad + plot_h}" class="axis"/>',
        f'<text x="{left - 6}" y="{top_pad + 8}" text-anchor="end" class="v">{top:,}</text>',
        f'<text x="{left - 6}" y="{top_pad + plot_h}" text-anchor="end" class="v">0</text>',
    ]
    for i, lab in enumerate(labels):
        if i in (0, len(labels) - 1) or len(labels) <= 8:
            x, _ = xy(i, 0)
            anchor = "start" if i == 0 else ("end" if i == len(labels) - 1 else "middle")
            parts.append(
                f'<text x="{x:.1f}" y="{height - 8}" text-anchor="{anchor}" class="v">{escape(lab)}</text>'
            )
    for name, values in series.items():
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(values)))
        c = colour(name)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{c}" stroke-width="2">'
            f"<title>{escape(name)}</title></polyline>"
        )
        lx, ly = xy(len(values) - 1, values[-1])
        parts.append(f'<circle cx="{lx:.1f}" cy="{ly:.1f}" r="3.5" fill="{c}"/>')
    parts.append("</svg>")
    return f"<figure><figcaption>{escape(title)}</figcaption>{''.join(parts)}{legend(list(series))}</figure>"


def legend(keys: Sequence[str]) -> str:
    items = "".join(f'<span><i style="background:{colour(k)}"></i>{escape(k)}</span>' for k in keys)
    return f'<div class="legend">{items}</div>'


# -- the page --------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px}
.meta{color:#666;margin-bottom:16px} .cards{display:flex;flex-wrap:wrap;gap:12px}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:130px}
.card b{display:block;font-size:22px} .card span{color:#666;font-size:12px}
.ok{color:#2b7a3d} .bad{color:#c0392b} .warn{color:#b9770e}
figure{margin:12px 0} figcaption{font-weight:600;margin-bottom:6px}
svg text.l{font-size:12px;fill:#333} svg text.v{font-size:11px;fill:#555}
svg .axis{stroke:#999;stroke-width:1} .none{color:#888}
.legend{display:flex;flex-wrap:wrap;gap:10px;font-size:12px;margin-top:4px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
table{border-collapse:collapse;font-size:13px} td,th{border-bottom:1px solid #eee;padding:3px 10px;text-align:left}
td.n{text-align:right}
"""


def _card(label: str, value: Any, figure: str, cls: str = "") -> str:
    shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
    klass = f' class="{cls}"' if cls else ""
    return (
        f'<div class="card"><b data-figure="{figure}"{klass}>{escape(shown)}</b>'
        f"<span>{escape(label)}</span></div>"
    )


def gate_text(gate: Mapping[str, Any] | None) -> tuple[str, str]:
    """(verdict, css class): not run / not configured / blocked / warn / passed."""
    if not gate:
        return "not run", "warn"
    if not gate.get("configured", True):  # no evaluation set: nothing was judged
        return "not configured", "warn"
    if gate.get("blocked"):
        return "blocked", "bad"
    return ("warn", "warn") if gate.get("status") == "warn" else ("passed", "ok")


def _trend_series(runs: Sequence[Mapping[str, Any]], dry: bool) -> dict[str, list[int]]:
    if dry:
        planned = [r.get("planned", {}) for r in runs]
        return {
            "delete": [p.get("delete_expired", 0) + p.get("delete_pending", 0) for p in planned],
            "review": [p.get("review", 0) for p in planned],
            "consolidate_candidate": [p.get("consolidate_candidate", 0) for p in planned],
            "supersede_candidate": [p.get("supersede_candidate", 0) for p in planned],
        }
    names = ("deleted", "superseded", "consolidated", "quarantined", "reviewed", "failed")
    return {k: [int(r.get("counts", {}).get(k, 0)) for r in runs] for k in names}


def render(summary: Mapping[str, Any], detail: Breakdown, past: Sequence[Mapping[str, Any]]) -> str:
    """The page for one run. ``summary`` is ``RunSummary.as_json()``; ``past`` older receipts."""
    mode = str(summary.get("mode", "dry_run"))
    dry = mode == "dry_run"
    status = str(summary.get("status", ""))
    verdict, vcls = gate_text(summary.get("gate"))
    model = summary.get("model") or {}
    lifecycle = summary.get("lifecycle") or {}
    cards = [
        _card("records processed", int(summary.get("records", 0)), "records"),
        _card("status", status, "status", "ok" if status == "success" else "bad"),
        _card("regression gate", verdict, "gate", vcls),
        _card("model calls", int(model.get("calls", 0)), "model-calls"),
        _card(
            "tokens in / out",
            f"{model.get('input_tokens', 0):,} / {model.get('output_tokens', 0):,}",
            "tokens",
        ),
    ]
    if dry:
        deletes = dict(would_change(summary))["delete"]
        cards.append(
            _card("an apply run would delete", deletes, "would-delete", "warn" if deletes else "")
        )
    else:
        cards += [
            _card("deleted", int(lifecycle.get("deleted", 0)), "deleted"),
            _card("superseded", int(lifecycle.get("superseded", 0)), "superseded"),
        ]

    sections = [f'<div class="cards">{"".join(cards)}</div>']
    actions = [(k, int(v)) for k, v in (summary.get("counts") or {}).items()]
    sections.append(
        "<h2>Planned actions</h2>" + bar_chart(actions, title="records by planned action")
    )
    if dry:
        sections.append(
            "<h2>What an apply run would change</h2>"
            + bar_chart(would_change(summary), title="an apply run would")
        )
    else:
        sections.append(
            "<h2>Outcomes</h2>"
            + bar_chart([(k, int(v)) for k, v in lifecycle.items()], title="outcomes")
        )
    ns_rows = sorted(detail.by_namespace.items(), key=lambda kv: -sum(kv[1].values()))
    sections.append(
        "<h2>By namespace</h2>"
        + stacked_chart(
            ns_rows[:TOP],
            title=f"records by namespace pattern and action (top {TOP} of {len(ns_rows)})",
        )
    )
    sections.append(
        "<h2>Top reasons</h2>" + bar_chart(detail.reasons.most_common(TOP), title="reason codes")
    )
    sections.append("<h2>Regression gate</h2>" + _gate_table(summary.get("gate")))
    sections.append("<h2>Model usage</h2>" + _model_table(model))

    runs = [
        *past,
        {
            "cutoff": summary.get("cutoff"),
            "counts": lifecycle,
            "planned": summary.get("counts", {}),
            "records_found": summary.get("records", 0),
        },
    ]
    labels = [str(r.get("cutoff") or "")[:10] for r in runs]
    sections.append(f"<h2>Trends (last {len(runs)} {'dry runs' if dry else 'runs'})</h2>")
    sections.append(
        trend_chart(
            labels,
            _trend_series(runs, dry),
            title="planned changes per run" if dry else "changes per run",
        )
    )
    if stopped := [r for r in past if r.get("status") not in (None, "success", "partial_failure")]:
        named = ", ".join(f"{str(r.get('cutoff') or '')[:10]} {r.get('status')}" for r in stopped)
        sections.append(f'<p class="warn">not complete: {escape(named)}</p>')
    done = [r for r in runs if "records_found" in r]  # a stopped run found no total
    sections.append(
        trend_chart(
            [str(r.get("cutoff") or "")[:10] for r in done],
            {"processed": [int(r["records_found"]) for r in done]},
            title="records processed per run",
        )
    )
    if failed := summary.get("failed_shards") or []:
        codes = Counter(str(s.get("code", "")) for s in failed)
        sections.append(
            "<h2>Failed shards</h2>"
            + bar_chart(codes.most_common(TOP), title="failed shards by code")
        )

    title = f"memlife {mode.replace('_', ' ')} {summary.get('run_id', '')}"
    meta = (
        f"policy {summary.get('policy_version', '')} · cutoff {summary.get('cutoff', '')} · "
        f"{summary.get('shards', 0):,} shards · {summary.get('seconds', 0)} s"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{escape(title)}</h1><div class="meta">{escape(meta)}</div>'
        + "".join(sections)
        + '<p class="meta">Counts, codes and namespace patterns only: no memory content, no ids.</p>'
        "</body></html>"
    )


def _gate_table(gate: Mapping[str, Any] | None) -> str:
    if not gate:
        return (
            '<p class="warn">not run: no evaluation set (--eval-cases). Without one nothing is '
            "deleted for score or review reasons in an enforced namespace.</p>"
        )
    verdict, cls = gate_text(gate)
    rows = "".join(
        f'<tr><td>{escape(name)}</td><td class="n">{g.get("before", "")}</td>'
        f'<td class="n">{g.get("value", "")}</td><td class="n">{g.get("threshold", "")}</td>'
        f'<td class="{"ok" if g.get("passed") else "bad"}">{"passed" if g.get("passed") else "failed"}</td></tr>'
        for name, g in (gate.get("gates") or {}).items()
    )
    reasons = ", ".join(escape(str(r)) for r in gate.get("reasons", [])) or "none"
    return (
        f'<p><b class="{cls}">{verdict}</b> · proposed deletions {gate.get("proposed_deletions", 0):,}'
        f" · cases {gate.get('cases', 0)} · reasons: {reasons}</p>"
        "<table><tr><th>gate</th><th>before</th><th>after</th><th>threshold</th><th></th></tr>"
        f"{rows}</table>"
    )


def _model_table(model: Mapping[str, Any]) -> str:
    rows = [
        ("calls", model.get("calls", 0)),
        ("answers reused from a dry run", model.get("answers_reused", 0)),
        ("input tokens", model.get("input_tokens", 0)),
        ("output tokens", model.get("output_tokens", 0)),
    ]
    rows += [(f"rejected: {k}", v) for k, v in (model.get("rejections") or {}).items()]
    body = "".join(
        f'<tr><td>{escape(str(k))}</td><td class="n">{int(v):,}</td></tr>' for k, v in rows
    )
    return f"<table>{body}</table>"


def write_run_report(
    sink: ReceiptSink, prefix: str, summary: Mapping[str, Any], receipt_key: str | None = None
) -> str | None:
    """Render and store the page beside the run's receipt (``run_receipts.page_key``),
    create-only like every receipt. Returns its location; None when the sink refused."""
    from memlife.review import run_info
    from memlife.run_receipts import page_key

    store = run_info(sink, prefix).store
    past = history(sink, str(summary.get("mode")), str(summary.get("run_id")), store=store)
    page = render(summary, breakdown(summary.get("report_parquet")), past)
    key = page_key(prefix, receipt_key)
    sink.put_new(key, page.encode("utf-8"), "text/html; charset=utf-8")
    return sink.location(key)
