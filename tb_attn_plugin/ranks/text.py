"""Plain-text rendering of a rank summary for the terminal."""

from __future__ import annotations

from typing import Any, Mapping

from ..text.words import duration

MAX_RANK_ROWS = 16  # the slowest ones; a job of 1,024 ranks prints its extremes, not every rank
MAX_LAYER_ROWS = 5
MAX_LISTED_ROWS = 5  # left-out traces named on the line that says how many there are


def render_ranks(run: str, doc: Mapping[str, Any]) -> str:
    world = f" of world size {doc['world_size']}" if doc.get("world_size") else ""
    out = [f"ranks of {run}: {doc['rank_count']} ranks{world}", f"  {doc['headline']}"]
    if doc.get("missing_count"):
        shown = ", ".join(str(r) for r in doc["missing_ranks"][:20])
        out.append(f"  missing ranks ({doc['missing_count']}): {shown}{' …' if doc['missing_count'] > 20 else ''}")
    if doc.get("duplicate_count"):
        dups = doc["duplicate_ranks"][:MAX_LISTED_ROWS]
        shown = ", ".join(f"{d['worker']} (rank {d['rank']}, kept {d['kept']})" for d in dups)
        more = " …" if doc["duplicate_count"] > len(dups) else ""
        hint = ("; worker names may carry a node's local rank" if any(d["rank_from"] == "worker name" for d in dups)
                else "")
        out.append(f"  left out, their rank taken by another trace ({doc['duplicate_count']}): {shown}{more}{hint}")
    if doc.get("unranked_count"):
        names = doc["unranked_workers"][:MAX_LISTED_ROWS]
        more = " …" if doc["unranked_count"] > len(names) else ""
        out.append(f"  without a rank, left out ({doc['unranked_count']}): {', '.join(names)}{more}")
    for odd in doc.get("odd_ranks") or []:
        out.append(f"  rank {odd['rank']} runs {odd['what']} {odd['value']} where the others run {odd['usual']}")
    stages = doc.get("stages") or []
    rows = sorted(doc["ranks"], key=lambda r: (-r["attention_us"], r["rank"]))
    header = ["rank", "attention", "× median"] + stages
    table = [[str(r["rank"]), duration(r["attention_us"]), f"{r['vs_median']:.2f}" if r["vs_median"] is not None else "-"]
             + [duration(r["stages"][st]) if r["stages"].get(st) else "-" for st in stages] for r in rows[:MAX_RANK_ROWS]]
    widths = [max(len(x[i]) for x in table + [header]) for i in range(len(header))]
    line = lambda cells: "  " + "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    out += ["", line(header), line(["-" * w for w in widths])] + [line(t) for t in table]
    if len(rows) > MAX_RANK_ROWS:
        out.append(f"  … {len(rows) - MAX_RANK_ROWS} faster ranks not shown (--json has all)")
    spread = [lay for lay in doc.get("layers") or [] if (lay.get("spread") or 0) > 1.0][:MAX_LAYER_ROWS]
    if spread:
        out.append("")
        out += [f"  layer {lay['layer']}: rank {lay['slowest_rank']} takes {lay['spread']:.2f}× the median "
                f"({duration(lay['max_us'])} vs {duration(lay['median_us'])})" for lay in spread]
    return "\n".join(out)
