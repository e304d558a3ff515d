"""The table-health page: server-rendered HTML (no build step), every value escaped."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px;color:#1a202c}
h1{font-size:1.4rem;margin:0 0 4px} h2{font-size:1.15rem;margin:24px 0 6px}
h3{font-size:.95rem;margin:14px 0 4px;color:#2d3748}
.muted{color:#718096;font-size:.85rem} table{border-collapse:collapse;margin:4px 0 8px}
td,th{border:1px solid #e2e8f0;padding:3px 8px;font-size:.85rem;text-align:left}
th{background:#f7fafc} .card{border:1px solid #cbd5e0;border-radius:8px;padding:8px 14px;
margin-bottom:14px} .kpi{display:inline-block;margin-right:18px} .kpi b{font-size:1.05rem}
.warn{color:#b7791f} .ok{color:#2f855a} .bad{color:#c53030}
th.explained{text-decoration:underline dotted;cursor:help} .legend{max-width:60rem}
"""

BUCKET_COLUMNS = {
    "partition": "The partition's values (Paimon's k=v path).",
    "bucket": "The bucket number: each bucket of a partition is one LSM tree.",
    "files per level": "Live data files at each LSM level (L0: fresh writes; the highest "
                       "level: the compacted base).",
    "sorted runs": "What compaction counts: each level-0 file is a run, each level >= 1 one "
                   "run. Compaction is due at num-sorted-run.compaction-trigger.",
    "level-0 files": "Files written since the last compaction of the bucket.",
    "size amp %": "Size amplification: bytes above the highest level, relative to it, as "
                  "Paimon's universal compaction computes it. '-': nothing compacted to a "
                  "level above 0 yet, so there is no base to compare with.",
}
SNAPSHOT_COLUMNS = {
    "records": "Total records in the snapshot's live files (before merging keys).",
    "delta": "Records this commit added (negative for an overwrite that removed more, or a "
             "compaction that merged superseded row versions away: no data lost).",
    "commit user": "Who committed: an Airflow run's commit user names its DAG, task and run.",
    "identifier": "The commit identifier (the run's date for an ingest).",
}


class Html(str):
    """Markup built here from escaped parts: put into a cell as it is."""


def _e(v: Any) -> str:
    if isinstance(v, Html):
        return str(v)
    return "-" if v is None or v == "" else escape(str(v))


def _table(headers: list[str], rows: list[list[Any]],
           explain: dict[str, str] | None = None) -> str:
    """A table; ``explain`` gives a header its tooltip (shown as a dotted underline)."""
    explain = explain or {}
    head = "".join(f'<th title="{escape(explain[h])}" class="explained">{escape(h)}</th>'
                   if h in explain else f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _kpi(label: str, value: Any, cls: str = "", note: str = "") -> str:
    extra = f' <span class="muted">({escape(note)})</span>' if note else ""
    return f'<span class="kpi {cls}">{escape(label)}: <b>{_e(value)}</b>{extra}</span>'


def human_size(n: Any) -> str:
    """``1536`` -> ``1.5 KiB``; bytes below 1 KiB as they are."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # not reached


def run_link(dag_id: str | None, run_id: str | None, text: str | None = None) -> Any:
    """A run id linked to its page in Airflow's UI (``/dags/<dag>/runs/<run>``), opened in
    the parent frame."""
    if not dag_id or not run_id:
        return text or run_id
    href = f"/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
    return Html(f'<a class="run-link" href="{escape(href)}" target="_top" '
                f'onclick="return lakeNavigate(this)">{escape(text or run_id)}</a>')


def _lock(lock: dict[str, Any] | None) -> str:
    if not lock:
        return _kpi("catalog lock", "unknown")
    state = lock.get("state")
    text = str(state)
    if state in ("held", "stale"):
        text += f" by {lock.get('owner')} since {lock.get('since')} (expires {lock.get('expires')})"
    return _kpi("catalog lock", text, "warn" if state in ("held", "stale") else "")


def _run(r: dict[str, Any] | None) -> str:
    if not r:
        return "never"
    return (f"{escape(r['end'])} ({escape(r['state'])}, run "
            f"{_e(run_link(r.get('dag_id'), r.get('run_id')))})")


def _backlog(t: dict[str, Any]) -> str:
    """Level-0 files, in warning colour only when compaction has something to do now."""
    backlog, preview = t["level0_backlog"], t["compaction_preview"]
    if not backlog:
        return _kpi("level-0 backlog", 0, "ok")
    if preview["buckets"]:
        return _kpi("level-0 backlog", backlog, "warn", "compaction is due")
    return _kpi("level-0 backlog", backlog, "",
                f"no action due: {preview['skipped_reason'] or 'below the triggers'}")


def _last_compaction(t: dict[str, Any]) -> str:
    lc = t.get("last_compaction")
    if lc:
        return f"snapshot {lc['id']} at {lc['time']}"
    n = t.get("snapshots_retained") or len(t.get("snapshots") or [])
    return (f"no COMPACT among the {n} snapshot(s) kept (older snapshots expire by "
            "snapshot.num-retained / snapshot.time-retained: history, not data)")


def render_table(t: dict[str, Any]) -> str:
    name = escape(t["name"])
    if t.get("error"):
        return f'<div class="card" id="{escape(t["slug"])}"><h2>{name}</h2>' \
               f'<p class="bad">{escape(t["error"])}</p></div>'
    if not t.get("exists"):
        return f'<div class="card" id="{escape(t["slug"])}"><h2>{name}</h2>' \
               '<p class="muted">not created yet (the first ingest run creates it)</p></div>'
    preview = t["compaction_preview"]
    plan = (f"{preview['buckets']} bucket(s), {preview['files']} file(s) would be compacted"
            if preview["buckets"] else f"nothing to compact: {preview['skipped_reason']}")
    amp = t["max_size_amplification_percent"]
    parts = [
        f'<div class="card" id="{escape(t["slug"])}"><h2>{name}</h2>',
        f'<div class="muted">{_e(t.get("description"))}</div><p>',
        _kpi("snapshots", f"{t['earliest_snapshot']}..{t['latest_snapshot']}"),
        _kpi("live files", t["total_files"]), _kpi("rows in files", t["total_rows_in_files"]),
        _kpi("size", human_size(t["total_bytes"])),
        _backlog(t),
        _kpi("max size amplification %", amp, "",
             "" if amp is not None else "nothing compacted above level 0 yet"),
        "<br>", _lock(t.get("lock")), "</p>",
        f"<p><b>Compaction now:</b> {escape(plan)}<br>",
        f"<b>Last compaction:</b> {escape(_last_compaction(t))}"
        f" &middot; task: {_run(t.get('last_compaction_task'))}<br>",
        f"<b>Last expiry:</b> {_run(t.get('last_expiry'))}</p>",
        "<h3>Buckets (sorted runs per bucket)</h3>",
        _table(list(BUCKET_COLUMNS),
               [[b["partition"] or "(unpartitioned)", b["bucket"],
                 ", ".join(f"L{k}: {v}" for k, v in sorted(b["files_per_level"].items())),
                 b["sorted_runs"], b["level0_files"], b["size_amplification_percent"]]
                for b in t["buckets"]], BUCKET_COLUMNS),
        "<p class='muted legend'>Hover a column name for what it means. size amp % '-': "
        "nothing compacted to a level above 0 yet, so there is no base to compare with.</p>",
        *_dynamic_buckets(t.get("dynamic_buckets") or []),
        *_deletion_vectors(t.get("deletion_vectors") or []),
        *_asset(t.get("asset") or {}),
        *_asset(t.get("compaction_asset") or {}, "Compactions (their own asset: COMPACT "
                "commits rewrite files, not data, and schedule nothing)"),
        *_offpeak(t.get("offpeak")),
        *_done(t.get("done_partitions") or [], t.get("mark_done_actions") or []),
        "<h3>Latest snapshots</h3>",
        _table(["id", "kind", "time (UTC)", "records", "delta", "commit user", "identifier"],
               [[s["id"], s["kind"], s["time"], s["total_record_count"],
                 s["delta_record_count"], s["commit_user"], s["commit_identifier"]]
                for s in t["snapshots"]], SNAPSHOT_COLUMNS),
    ]
    if t.get("tags"):
        parts += ["<h3>Tags</h3>", _table(["tag", "snapshot", "kind"], [
            [g["name"], g["snapshot_id"], g["commit_kind"]] for g in t["tags"]])]
    parts.append("</div>")
    return "".join(parts)


def _asset(a: dict[str, Any], title: str = "Asset") -> list[str]:
    """An asset of the table: a link to its page (outside the plugin's frame), where the
    table lives, and its latest events."""
    if not a:
        return []
    name = escape(str(a.get("name", "")))
    link = (f'<a class="asset-link" href="{escape(a["url"])}" target="_top" '
            f'onclick="return lakeNavigate(this)">{name}</a>'
            if a.get("url") else f"{name} <span class='muted'>(no event yet)</span>")
    where = (f" <span class='muted'>location {escape(a['location'])}</span>"
             if a.get("location") else "")
    parts = [f'<h3>{escape(title)}</h3><p class="asset">{link}{where}</p>']
    events = a.get("events") or []
    if events:
        parts.append('<div class="asset-events">' + _table(
            ["event", "time (UTC)", "commit", "snapshots", "rows (net)", "partitions", "done",
             "from", "what changed"],
            [[e["id"], e["time"], e["extra"].get("commit_kind"),
              ", ".join(map(str, e["extra"].get("snapshot_ids") or [])),
              e["extra"].get("rows"), ", ".join(e["extra"].get("partitions") or []),
              ", ".join(e["extra"].get("partitions_done") or []),
              run_link(e.get("dag_id"), e.get("run_id"), f"{e['dag_id']}.{e['task_id']}")
              if e.get("dag_id") else None,
              e["extra"].get("summary")]
             for e in events]) + "</div>")
    return parts


def _offpeak(o: dict[str, Any] | None) -> list[str]:
    if not o:
        return []
    now = ("inside it now" if o.get("in_window_now") else "outside it now") \
        if o.get("defined") else "compacts whenever buckets pass the triggers"
    return [f'<p class="offpeak"><b>Compaction window:</b> {escape(o["text"])} '
            f'({escape(now)}, local hour {o.get("now_hour")}) &middot; '
            f'num-sorted-run.compaction-trigger {o["compaction_trigger"]}, '
            f'stop-trigger {o["stop_trigger"]} (compacts at once)</p>']


def _done(marks: list[dict[str, Any]], actions: list[str]) -> list[str]:
    how = (f"partition.mark-done-action: {', '.join(actions)}" if actions
           else "the table does not mark partitions done (partition.end-input-to-done)")
    parts = [f"<h3>Partitions marked done</h3><p class='muted'>{escape(how)}</p>"]
    if marks:
        parts.append('<div class="done-partitions">' + _table(
            ["partition", "marked at (UTC)", "_SUCCESS", "done-partition", "snapshot"],
            [[m["partition"], _millis_text(m["marked_at"]),
              "yes" if m.get("success_file") else "-", m.get("done_partition"),
              m.get("snapshot_id")] for m in marks]) + "</div>")
    elif actions:
        parts.append("<p class='muted'>none yet</p>")
    return parts


def _millis_text(ms: Any) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC).isoformat(timespec="seconds") \
        if ms else "-"


def _dynamic_buckets(parts: list[dict[str, Any]]) -> list[str]:
    """A dynamic-bucket table's buckets per partition and their row (key) counts."""
    if not parts:
        return []
    return ["<h3>Dynamic buckets (rows per bucket, from the HASH index)</h3>",
            _table(["partition", "buckets", "rows", "rows per bucket"],
                   [[p["partition"] or "(unpartitioned)", p["buckets"], p["keys"],
                     ", ".join(f"{b}: {n}" for b, n in p["rows_per_bucket"].items())]
                    for p in parts])]


def _deletion_vectors(buckets: list[dict[str, Any]]) -> list[str]:
    """A deletion-vector table's deleted rows per bucket (from its vectors' cardinalities)."""
    if not buckets:
        return []
    return ["<h3>Deletion vectors (deleted rows per bucket)</h3>",
            _table(["partition", "bucket", "files with vectors", "deleted rows", "rows",
                    "deleted ratio"],
                   [[b["partition"] or "(unpartitioned)", b["bucket"], b["files_with_vectors"],
                     b["deleted_rows"], b["rows"],
                     "-" if b["deleted_ratio"] is None else f"{b['deleted_ratio']:.1%}"]
                    for b in buckets])]


def _catalog_options(report: dict[str, Any]) -> str:
    """The tables file's catalog option keys (never their values: some are credentials)."""
    keys = report.get("catalog_options") or []
    return f" &middot; catalog options: {escape(', '.join(keys))}" if keys else ""


# Airflow shows the page in a sandboxed iframe (no top navigation): a link to one of Airflow's
# own pages moves the parent's client-side router instead (same origin), else opens normally.
_SCRIPT = """
function lakeNavigate(a) {
  try {
    var w = window.parent;
    if (w && w !== window) {
      w.history.pushState({}, "", a.getAttribute("href"));
      w.dispatchEvent(new PopStateEvent("popstate", {state: {}}));
      return false;
    }
  } catch (e) {}
  return true;
}
"""


def render_page(report: dict[str, Any], user: str | None, refresh_seconds: int = 0) -> str:
    """The page; ``refresh_seconds`` > 0 reloads it that often (a meta refresh)."""
    cards = "".join(render_table(t) for t in report["tables"])
    who = f" &middot; signed in as {escape(user)}" if user else ""
    refresh = (f"<meta http-equiv='refresh' content='{int(refresh_seconds)}'>"
               if refresh_seconds > 0 else "")
    every = (f" &middot; refreshes every {int(refresh_seconds)} s" if refresh_seconds > 0
             else " &middot; reload to refresh")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{refresh}<title>Lake tables</title>"
        f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body><h1>Lake tables</h1>"
        f"<div class='muted'>warehouse {escape(report['warehouse'])} &middot; catalog lock: "
        f"{escape(report['lock'])}{_catalog_options(report)} &middot; generated "
        f"{escape(report['generated'])}{every}{who}</div>"
        f"{cards}</body></html>"
    )
