"""The status page as HTML: what needs attention first (all flows), then one card per flow (state,
what needs attention, lag, record age, last run, a chart of lag and throughput, the last operations,
pause/resume/stop buttons for users who may, links to its DAGs), partitions and consumer groups on
demand. Durations are in human units (ms, s, min, h).

Self-contained (inline CSS and SVG, a few lines of script, nothing fetched from elsewhere) so it
renders inside Airflow's iframe and offline. Colours follow Airflow 3's UI (light and dark). The
script refreshes the flows every REFRESH_S seconds in place and keeps open sections open. Every
number carries a `data-k` attribute, so tests read exactly what a person sees.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Collection, Sequence

from mirrorflow.observe.status_page import ChartPoint, FlowPage
from mirrorflow.ops.control.inputs import ACTION

REFRESH_S = 10
Links = Callable[[str], Sequence[tuple[str, str]]]  # flow name -> (label, url) of its DAGs

CSS = """
:root{--bg:#fff;--fg:#1a202c;--muted:#718096;--card:#fff;--border:#e2e8f0;--accent:#017cee;
--ok:#38a169;--warn:#d69e2e;--bad:#e53e3e;--chip:#edf2f7;font-family:Inter,system-ui,-apple-system,
"Segoe UI",Roboto,sans-serif;font-size:14px;color:var(--fg);background:var(--bg)}
@media (prefers-color-scheme:dark){:root{--bg:#1a202c;--fg:#e2e8f0;--muted:#a0aec0;--card:#2d3748;
--border:#4a5568;--chip:#4a5568}}
body{margin:0;padding:16px 24px;background:var(--bg)}
h1{font-size:20px;font-weight:600;margin:0 0 4px}
.sub{color:var(--muted);margin-bottom:16px}
.card{background:var(--card);border:1px solid var(--border);border-radius:8px;padding:16px;margin-bottom:16px}
.head{display:flex;align-items:center;gap:12px;flex-wrap:wrap}
.head h2{font-size:18px;margin:0}
.badge{border-radius:12px;padding:2px 10px;font-size:12px;font-weight:600;color:#fff}
.running{background:var(--ok)}.paused{background:var(--warn)}.stopped,.error{background:var(--bad)}
.links a{color:var(--accent);text-decoration:none;margin-right:12px}
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:8px;margin:12px 0}
.tile{background:var(--chip);border-radius:6px;padding:8px 10px}
.tile .l{color:var(--muted);font-size:12px}.tile .v{font-size:18px;font-weight:600}
.problems{margin:8px 0;padding-left:18px}.problems li{color:var(--bad);margin:2px 0}
.fine{color:var(--ok);margin:8px 0}
.rpo{margin:8px 0;font-weight:600}.rpo.missed{color:var(--bad)}.rpo.met{color:var(--ok)}.rpo.unknown{color:var(--warn)}
.charts{display:flex;gap:16px;flex-wrap:wrap}.chart{flex:1;min-width:280px}
.chart .l,.axis{color:var(--muted);font-size:12px}.axis{display:flex;justify-content:space-between}
svg{width:100%;height:120px;background:var(--chip);border-radius:6px}
table{border-collapse:collapse;width:100%;margin-top:8px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--border);font-variant-numeric:tabular-nums}
th{color:var(--muted);font-weight:500;font-size:12px}
details{margin-top:10px}summary{cursor:pointer;color:var(--accent)}
.note{color:var(--muted)}
.attn{border:1px solid var(--bad);border-radius:8px;padding:8px 16px;margin-bottom:16px}
.attn h2,.card h3{font-size:14px;margin:8px 0 0}
.ops{margin:4px 0;padding-left:18px}.ops li{margin:2px 0}
.control{display:flex;gap:8px;align-items:center;flex-wrap:wrap;margin-top:10px}
.control input{flex:1;min-width:200px;padding:4px 8px;border:1px solid var(--border);border-radius:6px;
background:var(--bg);color:var(--fg)}
.control button{padding:4px 12px;border-radius:6px;border:1px solid var(--border);background:var(--chip);
color:var(--fg);cursor:pointer}
"""

SCRIPT = r"""
(function(){
  function refresh(){
    var open=[].map.call(document.querySelectorAll('details[open]'),function(d){return d.id});
    fetch(location.pathname+'?fragment=1',{credentials:'same-origin'}).then(function(r){
      if(!r.ok) throw new Error(r.status); return r.text();
    }).then(function(t){
      // a reason being typed and the last answer survive the refresh
      var kept={}, a=document.activeElement, focus=a&&a.closest&&a.closest('.control');
      [].forEach.call(document.querySelectorAll('.control'),function(c){
        kept[c.dataset.flowId]=[c.querySelector('input').value,c.querySelector('[data-k="control-result"]').textContent];
      });
      document.getElementById('flows').innerHTML=t;
      open.forEach(function(id){var d=document.getElementById(id); if(d) d.open=true;});
      [].forEach.call(document.querySelectorAll('.control'),function(c){
        var k=kept[c.dataset.flowId]; if(!k) return;
        c.querySelector('input').value=k[0]; c.querySelector('[data-k="control-result"]').textContent=k[1];
        if(focus&&focus.dataset.flowId===c.dataset.flowId) c.querySelector('input').focus();
      });
      document.getElementById('updated').textContent=new Date().toLocaleTimeString();
    }).catch(function(){});
  }
  setInterval(refresh, %d000);
  // pause / resume / stop: a JSON POST (a cross-site form cannot send one), answered in words
  document.addEventListener('click',function(ev){
    var b=ev.target.closest&&ev.target.closest('button[data-action]'); if(!b) return;
    var box=b.closest('.control'), out=box.querySelector('[data-k="control-result"]');
    var reason=box.querySelector('input').value;
    out.textContent=b.dataset.action+'...';
    fetch(location.pathname.replace(/\/$/,'')+'/api/flows/'+encodeURIComponent(box.dataset.flowId)+'/control',
      {method:'POST',credentials:'same-origin',headers:{'Content-Type':'application/json'},
       body:JSON.stringify({action:b.dataset.action,reason:reason||null})}
    ).then(function(r){return r.json().then(function(j){return [r.ok,j];});}).then(function(res){
      out.textContent=res[0]?res[1].message:('refused: '+(res[1].detail||'error'));
      if(res[0]) refresh();
    }).catch(function(e){out.textContent='failed: '+e;});
  });
})();
"""


def _e(v: object) -> str:
    return html.escape(str(v))


def _n(v: int | None) -> str:
    return "unknown" if v is None else f"{v:,}"


def _secs(v: float | None) -> str:
    if v is None:
        return "unknown"
    if v < 120:
        return f"{v:.0f} s"
    if v < 7200:
        return f"{v / 60:.0f} min"
    return f"{v / 3600:.1f} h"


def _bytes(v: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if v < 1000 or unit == "GB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024  # type: ignore[assignment]
    return str(v)


def _ms(v: int | None) -> str:
    """A duration in milliseconds in human units: `250 ms`, `12 s`, `50 min`, `2.5 h`."""
    if v is None:
        return "-"
    return f"{v:,} ms" if v < 1000 else _secs(v / 1000)


def _ago(now_ms: int, at_ms: int) -> str:
    return _secs(max(0, now_ms - at_ms) / 1000) + " ago"


def _tile(key: str, label: str, value: str) -> str:
    return f'<div class="tile"><div class="l">{_e(label)}</div><div class="v" data-k="{key}">{_e(value)}</div></div>'


def _polyline(values: Sequence[float], w: int = 600, h: int = 120, pad: int = 8) -> str:
    if not values:
        return ""
    top = max(values) or 1.0
    step = (w - 2 * pad) / max(1, len(values) - 1)
    pts = " ".join(f"{pad + i * step:.1f},{h - pad - (v / top) * (h - 2 * pad):.1f}" for i, v in enumerate(values))
    return pts


def chart_svg(points: Sequence[ChartPoint], key: str, label: str, color: str) -> str:
    """An inline SVG line of one series over the flow's runs (oldest left), with its peak named."""
    if key == "lag":  # a run that could not read the source's end has no lag to draw
        points = [p for p in points if p.lag is not None]
    values = [float((p.lag or 0) if key == "lag" else p.rate) for p in points]
    if not values:
        body = '<text x="50%" y="55%" text-anchor="middle" fill="currentColor" font-size="13">no runs yet</text>'
    else:
        pts = _polyline(values)
        dots = "".join(
            f'<circle cx="{x}" cy="{y}" r="2.5" fill="{"var(--bad)" if not p.ok else color}"/>'
            for (x, y), p in zip((c.split(",") for c in pts.split()), points, strict=True)
        )
        body = f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{pts}"/>{dots}'
    peak = max(values, default=0)
    unit = "records" if key == "lag" else "records/s"
    span = (
        f'<div class="axis"><span>{_clock(points[0].at)}</span><span>{_clock(points[-1].at)}</span></div>'
        if points
        else ""
    )
    return (
        f'<div class="chart"><div class="l">{_e(label)} (peak {peak:,.0f} {unit}, {len(values)} runs)</div>'
        f'<svg viewBox="0 0 600 120" preserveAspectRatio="none" data-k="chart-{key}" '
        f'data-points="{len(values)}">{body}</svg>{span}</div>'
    )


def _clock(ms: int) -> str:
    return time.strftime("%b %d %H:%M", time.localtime(ms / 1000))


def _partitions(page: FlowPage, fid: str) -> str:
    rows = "".join(
        f"<tr><td>{_e(p.topic)}</td><td>{p.partition}</td><td>{_n(p.next) if p.next >= 0 else '-'}</td>"
        f"<td>{'?' if p.end < 0 else f'{p.end:,}'}</td><td>{_n(p.lag)}</td>"
        f"<td>{_secs(p.lag_seconds(page.now_ms))}</td><td>{p.records:,}</td><td>{p.lost:,}</td>"
        f"<td>{_e(('STOPPED: ' if p.stopped else '') + (p.note or ''))}</td></tr>"
        for p in page.status.partitions
    )
    return (
        f'<details id="parts-{fid}"><summary>Partitions ({len(page.status.partitions)})</summary>'
        "<table><tr><th>topic</th><th>partition</th><th>next offset</th><th>source end</th><th>lag</th>"
        f"<th>lag (time)</th><th>records copied</th><th>lost</th><th>note</th></tr>{rows}</table></details>"
    )


def _resume(note: str) -> str:
    """How a group resumes at its checkpoint, when not exactly (earlier: what it re-reads)."""
    return f' <span class="note">{_e(note)}</span>' if note else ""


def _groups(page: FlowPage, fid: str) -> str:
    cp, written = page.last_checkpoint, page.last_checkpoint_written
    when = f"last checkpoint pass {_ago(page.now_ms, cp.at)}" if cp else "no checkpoint pass recorded yet"
    if written is not None and written is not cp:
        when += f", last checkpoint written {_ago(page.now_ms, written.at)} (no group moved since)"
    rows = "".join(
        f"<tr><td>{_e(g.group)}</td><td>{_e(g.topic)}</td><td>{g.partition}</td><td>{g.upstream:,}</td>"
        f"<td>{g.resume_at:,}{_resume(g.resume)}</td>"
        f"<td>{'-' if g.committed is None else f'{g.committed:,}'}</td>"
        f"<td>{_e(g.state)}</td><td>{_e(g.action)}</td></tr>"
        for g in page.groups
    )
    alone = "".join(f"<li><b>{_e(g)}</b>: left alone, {_e(why)}</li>" for g, why in sorted(page.left_alone.items()))
    note = f'<p class="note">{_e(page.group_note)}</p>' if page.group_note else ""
    groups = len({g.group for g in page.groups})
    table = (
        "<table><tr><th>group</th><th>target topic</th><th>partition</th><th>source offset</th>"
        "<th>resumes at (target)</th><th>committed on target</th><th>state on target</th><th>sync</th></tr>"
        f"{rows}</table>"
        if rows
        else '<p class="note">No consumer group has a checkpoint for this flow yet.</p>'
    )
    return (
        f'<details id="groups-{fid}"><summary>Consumer groups ({groups}; {_e(when)})</summary>{note}'
        f"{table}{f'<ul>{alone}</ul>' if alone else ''}</details>"
    )


def _operations(page: FlowPage) -> str:
    """The flow's newest operations (state.history), newest first."""
    if not page.operations:
        return '<p class="note" data-k="history">No operation recorded yet.</p>'
    items = "".join(
        f"<li><b>{_e(o.kind)}</b> {_e(_ago(page.now_ms, o.at))} by {_e(o.by or '?')}"
        f"{f' ({_e(o.via)})' if o.via else ''}{_e(': ' + o.details() if o.details() else '')}</li>"
        for o in reversed(page.operations)
    )
    return f'<ul class="ops" data-k="history">{items}</ul>'


def _control(page: FlowPage, links: Links) -> str:
    """Pause / resume / stop buttons (only rendered for a user who may trigger the control DAG;
    the endpoint checks again). A failed-over flow gets none: its next step is the failback (a
    link to its DAG), and a pause or stop would overwrite the record that it was failed over."""
    if page.status.failed_over:
        url = next((u for label, u in links(page.flow) if label == "failback"), "")
        link = f'<a href="{_e(url)}" target="_top">fail back</a>' if url else "fail back"
        return (
            f'<p class="note" data-k="next-step">Failed over: the next step is to {link} once '
            f"{_e(page.flow.split('->')[0])} is back (not a resume).</p>"
        )
    flow_id = page.flow.replace("->", "-")
    buttons = "".join(f'<button type="button" data-action="{a}">{a.capitalize()}</button>' for a in ACTION.choices)
    return (
        f'<div class="control" data-flow-id="{_e(flow_id)}"><input type="text" aria-label="Reason" '
        f'placeholder="Reason (optional, recorded in the history)">{buttons}'
        '<span class="note" data-k="control-result"></span></div>'
    )


def render_flow(page: FlowPage, links: Links, can_control: bool = False) -> str:
    """One flow's card; `can_control`: with its pause/resume/stop buttons."""
    s, fid = page.status, _e(page.flow.replace(">", "").replace("-", "_"))
    state = "error" if s.error else s.state.split()[0].strip(":,")
    badge = "unreadable" if s.error else "failed over" if s.failed_over else state
    run = page.last_run
    if run is None:
        last = "never"
    else:
        result = "skipped" if run.skipped else ("ok" if run.ok else "FAILED")
        last = f"{_ago(page.now_ms, run.at)}, {result}"
    tiles = "".join(
        [
            _tile("lag", "Lag (records)", _n(s.lag) if not s.error else "unknown"),
            _tile("lag-seconds", "Lag (time)", _secs(page.lag_seconds) if not s.error else "unknown"),
            # MM2's replication-latency-ms max of the last copying run: with a backlog, its age
            _tile("latency", "Record age when copied (last run, max)", _ms(page.latency_ms)),
            _tile("last-run", "Last run", last),
            _tile("records", "Records copied (total)", f"{s.records:,}"),
            _tile(
                "run-records",
                "Last run copied",
                "-" if run is None else f"{run.records:,} rec, {_bytes(run.byte_count)}",
            ),
            _tile(
                "window",
                f"Last {len(page.chart_runs)} runs",
                f"{page.window_records:,} rec, {_bytes(page.window_bytes)}",
            ),
            _tile("lost", "Lost to retention", f"{sum(p.lost for p in s.partitions):,}"),
        ]
    )
    problems = (
        '<h3>Needs attention</h3><ul class="problems" data-k="problems">'
        + "".join(f"<li>{_e(p)}</li>" for p in page.problems)
        + "</ul>"
        if page.problems
        else '<p class="fine" data-k="problems">No problems.</p>'
    )
    dag_links = "".join(f'<a href="{_e(url)}" target="_top">{_e(label)}</a>' for label, url in links(page.flow))
    running = f'<span class="note">{_e(s.running)}</span>' if s.running else ""
    ops = f'<p class="note" data-k="operations">{_e("; ".join(s.operations))}</p>' if s.operations else ""
    rpo = f'<p class="rpo {s.rpo.state}" data-k="rpo">{_e(s.rpo.line())}</p>' if s.rpo is not None else ""
    mirror = f'<p class="note" data-k="mirror">{_e(page.mirror)}</p>' if page.mirror else ""
    if page.schemas_line:
        rpo += f'<p class="note" data-k="schemas">{_e(page.schemas_line)}</p>'
    return (
        f'<section class="card" id="flow-{fid}" data-flow="{_e(page.flow)}"><div class="head">'
        f'<h2>{_e(page.flow)}</h2><span class="badge {state}" data-k="state">'
        f"{_e(badge)}</span>"
        f'{running}<span class="links">{dag_links}</span></div>'
        f'{rpo}{problems}{ops}{mirror}<div class="tiles">{tiles}</div>'
        f'<div class="charts">{chart_svg(page.chart, "lag", "Lag after each run", "#017cee")}'
        f"{chart_svg(page.chart, 'rate', 'Throughput of each run', '#38a169')}</div>"
        f"<h3>Operations (last {len(page.operations)})</h3>{_operations(page)}"
        f"{_control(page, links) if can_control else ''}"
        f"{_partitions(page, fid)}{_groups(page, fid)}</section>"
    )


def needs_attention(pages: Sequence[FlowPage]) -> str:
    """Every flow's problems in one list at the top of the page (empty when there are none)."""
    items = "".join(
        f'<li><a href="#flow-{_e(p.flow.replace(">", "").replace("-", "_"))}">{_e(p.flow)}</a>: {_e(problem)}</li>'
        for p in pages
        for problem in p.problems
    )
    if not items:
        return ""
    return f'<div class="attn" data-k="attention"><h2>Needs attention</h2><ul class="problems">{items}</ul></div>'


def render_flows(pages: Sequence[FlowPage], links: Links, controls: Collection[str] = ()) -> str:
    """Every flow's card; `controls`: the flows whose cards get pause/resume/stop buttons."""
    if not pages:
        return '<p class="note">No flows are configured.</p>'
    return needs_attention(pages) + "".join(render_flow(p, links, p.flow in controls) for p in pages)


def render_page(
    pages: Sequence[FlowPage], links: Links, now_ms: int | None = None, controls: Collection[str] = ()
) -> str:
    now = time.strftime("%H:%M:%S", time.localtime((now_ms or time.time() * 1000) / 1000))
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>mirrorflow status</title>'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head><body>'
        '<h1>Mirrorflow</h1><div class="sub">Replication flows, read from the target clusters. '
        f'Updated <span id="updated">{now}</span>, refreshes every {REFRESH_S} s.</div>'
        f'<div id="flows">{render_flows(pages, links, controls)}</div>'
        f"<script>{SCRIPT % REFRESH_S}</script></body></html>"
    )
