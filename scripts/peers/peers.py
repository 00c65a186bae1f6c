#!/usr/bin/env python3
"""Helpers of scripts/bench-peers.sh (standard library only; any Python 3.8+).

    peers.py sample SID OUT           CPU time of every process in session SID, every 0.1 s,
                                      until none is left: lines `mono_ns wall_ns cpu_ns`
    peers.py measure CLIENT DIR STREAMS TOKENS TTFT_MS ITL_MS SERVER_LOG CPU_SAMPLES
                                      one run's numbers (a JSON line) from what it left in DIR
    peers.py selfbench FILE           the per-stream-count rows of a `bench360 selfbench` table
    peers.py skip CLIENT STREAMS NOTE a placeholder row for a client that was not run
    peers.py table RESULTS.jsonl      the Markdown table: median of the runs per client and streams

Definitions (the same for every client measured here):
- window = the middle 80 % of the server's activity (first request's arrival .. last
  request's end, CLOCK_MONOTONIC, from the server's log): the steady state, without the
  clients' ramp-up and their cut-off at the deadline; without a server log, the client's own
  first start .. last end;
- tokens = content events the server sent inside the window (one token per event); without
  a server log, successful requests x tokens per response;
- client CPU = user + system time of all the client's processes inside the window (sampled
  from /proc every 0.1 s and interpolated; startup, dataset generation before the first
  request and report writing after the last are not counted);
- tok/s per client core = tokens / client CPU seconds;
- in flight held = time-weighted mean number of requests between arrival and end at the
  server over the window, else the same from the client's per-request start/end;
- TTFT error = the client's own per-request TTFT - the scripted time to first token
  (successful requests).
"""
import json
import math
import os
import statistics
import sys
import time

TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------- sample


def stat_fields(pid):
    """Fields 3.. of /proc/PID/stat (after the command name), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    return stat[stat.rfind(")") + 2 :].split()


def session_pids(sid):
    """The processes whose session is `sid` (field 6 of /proc/PID/stat)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = stat_fields(name)
            if fields and int(fields[3]) == sid:
                out.append(int(name))
    return out


def cmd_sample(sid, out_path):
    """Every 0.1 s: the summed utime + stime (fields 14, 15) of the session's processes.
    All of /proc is scanned for new members once a second only (the peers start their
    processes before the load), so that the sampler stays light on the CPU it shares."""
    last = {}  # pid -> highest CPU ticks seen (kept after the process exits)
    pids, scanned, empty = [], 0.0, 0
    with open(out_path, "w") as out:
        while True:
            if time.monotonic() - scanned >= 1.0:
                pids = sorted(set(pids) | set(session_pids(sid)))
                scanned = time.monotonic()
            alive = []
            for pid in pids:
                fields = stat_fields(pid)
                if fields is None or int(fields[3]) != sid:
                    continue
                alive.append(pid)
                t = int(fields[11]) + int(fields[12])
                if t > last.get(pid, -1):
                    last[pid] = t
            pids = alive
            cpu = int(sum(last.values()) * TICK_NS)
            out.write(f"{time.monotonic_ns()} {time.time_ns()} {cpu}\n")
            out.flush()
            empty = empty + 1 if not alive else 0
            if empty >= 3 and not session_pids(sid):
                return 0
            time.sleep(0.1)


def cmd_skip(client, streams, note):
    """A placeholder row for a client that was not run."""
    print(json.dumps({"client": client, "streams": int(streams), "skipped": True, "note": note}))
    return 0


# ---------------------------------------------------------------------------- measure


def read_samples(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 3:
                rows.append(tuple(int(x) for x in p))
    return rows


def cpu_at(samples, mono_ns):
    """Cumulative CPU ns of the client at `mono_ns`, linearly interpolated."""
    if not samples:
        return math.nan
    if mono_ns <= samples[0][0]:
        return samples[0][2]
    for (t0, _, c0), (t1, _, c1) in zip(samples, samples[1:]):
        if t0 <= mono_ns <= t1:
            return c0 + (c1 - c0) * (mono_ns - t0) / max(t1 - t0, 1)
    return samples[-1][2]


def wall_to_mono(samples):
    """Offset to add to a wall-clock ns stamp to get CLOCK_MONOTONIC (median of samples)."""
    return statistics.median(m - w for m, w, _ in samples) if samples else 0


def read_server_log(path):
    """[(arrive_ns, end_ns, [send_ns, ...])] of the server's log, or [] when there is none."""
    out = []
    if not path or not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 4:
                try:
                    out.append((int(p[2]), int(p[3]), [int(x) for x in p[4:]]))
                except ValueError:
                    pass
    return out


def middle(spans):
    """The middle 80 % of the union of the spans: (a, b), or None."""
    if not spans:
        return None
    lo = min(s[0] for s in spans)
    hi = max(s[1] for s in spans)
    a, b = lo + (hi - lo) / 10, hi - (hi - lo) / 10
    return (a, b) if b > a else None


def in_flight(spans):
    """Time-weighted mean number of open spans over the middle 80 % of their union."""
    w = middle(spans)
    if w is None:
        return math.nan
    a, b = w
    return sum(max(0.0, min(s[1], b) - max(s[0], a)) for s in spans) / (b - a)


def pct(values, q):
    """Percentile with linear interpolation (numpy's default)."""
    if not values:
        return math.nan
    v = sorted(values)
    k = (len(v) - 1) * q / 100
    f = math.floor(k)
    c = min(f + 1, len(v) - 1)
    return v[f] + (v[c] - v[f]) * (k - f)


def aiperf_requests(run_dir):
    """[(ok, ttft_ms, start_wall_ns, end_wall_ns)] from AIPerf's profile_export.jsonl."""
    path = None
    for root, _, files in os.walk(run_dir):
        if "profile_export.jsonl" in files:
            path = os.path.join(root, "profile_export.jsonl")
            break
    if path is None:
        return [], "no profile_export.jsonl"
    out, errors = [], {}
    with open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            meta, metrics = rec.get("metadata") or {}, rec.get("metrics") or {}
            if meta.get("benchmark_phase", "profiling") != "profiling":
                continue
            err = rec.get("error")
            ttft = (metrics.get("time_to_first_token") or {}).get("value")
            ok = not err and ttft is not None
            if meta.get("was_cancelled"):
                ok = None  # cut off at the deadline: neither success nor failure
            if err:
                kind = err.get("type", "error") if isinstance(err, dict) else str(err)
                errors[kind] = errors.get(kind, 0) + 1
            out.append((ok, ttft, meta.get("request_start_ns"), meta.get("request_end_ns")))
    note = ", ".join(f"{n} {k}" for k, n in errors.items())
    return out, note


def guidellm_requests(run_dir):
    """[(ok, ttft_ms, start_wall_ns, end_wall_ns)] from GuideLLM's benchmarks JSON."""
    path = os.path.join(run_dir, "benchmarks.json")
    if not os.path.exists(path):
        return [], "no benchmarks.json"
    with open(path) as f:
        report = json.load(f)
    out, notes = [], []
    for bench in report.get("benchmarks", []):
        reqs = bench.get("requests") or {}
        for kind in ("successful", "errored", "incomplete"):
            items = reqs.get(kind) or []
            if kind == "errored" and items:
                notes.append(f"{len(items)} errored")
            for r in items:
                s, e = r.get("request_start_time"), r.get("request_end_time")
                out.append(
                    (
                        {"successful": True, "errored": False}.get(kind),
                        r.get("time_to_first_token_ms"),
                        int(s * 1e9) if s else None,
                        int(e * 1e9) if e else None,
                    )
                )
    return out, ", ".join(notes)


def server_lateness(server, ttft_ms, itl_ms):
    """p99 of (send - schedule) over every content event in the server's log, ms: how far
    the server itself fell behind its script (it should stay near 0)."""
    late = []
    for arrive, _, sends in server:
        for k, t in enumerate(sends):
            late.append((t - arrive) / 1e6 - (ttft_ms + k * itl_ms))
    return pct(late, 99)


def cmd_measure(client, run_dir, streams, tokens, ttft_ms, itl_ms, server_log, cpu_samples):
    reqs, note = (aiperf_requests if client == "aiperf" else guidellm_requests)(run_dir)
    samples = read_samples(cpu_samples) if os.path.exists(cpu_samples) else []
    ok = [r for r in reqs if r[0] is True]
    failed = [r for r in reqs if r[0] is False]
    if reqs and not ok and "InvalidInferenceResultError" in note:
        note += (
            ' (AIPerf counts a chunk only with "object": "chat.completion.chunk", which'
            " this server's chunks lack)"
        )
    offset = wall_to_mono(samples)
    client_spans = [
        (r[2] + offset, r[3] + offset) for r in ok if r[2] is not None and r[3] is not None
    ]
    server = read_server_log(server_log)
    if server:
        # Steady state: the middle 80 % of the server's activity; tokens = content events
        # the server sent inside it (requests the client cut off at its deadline are not
        # logged by the server, and fall outside this window anyway).
        source = "server log"
        window = middle(server)
        if window:
            n_tokens = sum(1 for s in server for t in s[2] if window[0] <= t <= window[1])
        held = in_flight(server)
    else:
        # The client's view: first start .. last end of its successful requests.
        source = "client's export"
        window = None
        if client_spans:
            window = (min(a for a, _ in client_spans), max(b for _, b in client_spans))
        n_tokens = len(ok) * tokens
        held = in_flight(client_spans)
    if not ok:
        window = None  # nothing the client accepted: no throughput to report
    if window:
        lo, hi = window
        cpu_ns = cpu_at(samples, hi) - cpu_at(samples, lo)
    else:
        lo = hi = 0
        cpu_ns = math.nan
    ttft_err = [r[1] - ttft_ms for r in ok if r[1] is not None]
    row = {
        "client": client,
        "streams": streams,
        "requests": len(ok),
        "failed": len(failed),
        "tokens": n_tokens if window else 0,
        "window_s": (hi - lo) / 1e9,
        "tok_s": n_tokens / ((hi - lo) / 1e9) if hi > lo else math.nan,
        "cpu_s": cpu_ns / 1e9,
        "tok_s_per_core": n_tokens / (cpu_ns / 1e9) if cpu_ns and cpu_ns > 0 else math.nan,
        "cpu_ms_per_1k": (cpu_ns / 1e6) / (n_tokens / 1000) if window and n_tokens else math.nan,
        "in_flight": held,
        "in_flight_source": source,
        "ttft_err_p50": pct(ttft_err, 50),
        "ttft_err_p99": pct(ttft_err, 99),
        "server_late_p99": server_lateness(server, ttft_ms, itl_ms) if server else math.nan,
        "note": note,
    }
    print(json.dumps(row))
    return 0


# ---------------------------------------------------------------------------- selfbench


def md_tables(text):
    """Markdown tables in `text` as lists of {header: cell} rows."""
    tables, cur = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            cur = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cur is None:
            cur = {"head": cells, "rows": []}
            tables.append(cur)
        elif all(set(c) <= set("-: ") for c in cells):
            continue
        else:
            cur["rows"].append(dict(zip(cur["head"], cells)))
    return tables


def col(row, *needles):
    """The cell whose header contains every needle (case-insensitive), else None."""
    for head, cell in row.items():
        h = head.lower()
        if all(n.lower() in h for n in needles):
            return cell
    return None


def num(cell, i=0):
    """The i-th number of a cell like `1.2 / 3.4` or `1536 (0)`; NaN if absent."""
    if cell is None:
        return math.nan
    parts = cell.replace("(", " ").replace(")", " ").replace("/", " ").split()
    try:
        return float(parts[i].replace(",", ""))
    except (IndexError, ValueError):
        return math.nan


def cmd_selfbench(path):
    """Rows of bench360's own table, as `measure` would have written them."""
    with open(path) as f:
        tables = md_tables(f.read())
    by_streams = {}
    for t in tables:
        for row in t["rows"]:
            s = col(row, "streams")
            if s is None or not s.strip().isdigit():
                continue
            by_streams.setdefault(int(s), {}).update({k: v for k, v in row.items()})
    for streams, row in sorted(by_streams.items()):
        cpu_per_1k = num(col(row, "client cpu ms", "1000"))
        # TTFT error against the schedule, as for the peers (they cannot see the server log).
        sched = col(row, "ttft", "scheduled") or col(row, "ttft error")
        reqs = col(row, "requests")
        out = {
            "client": "bench360",
            "streams": streams,
            "requests": num(reqs, 0),
            "failed": num(reqs, 1),
            "tok_s": num(col(row, "tokens/s") or col(row, "chunks/s")),
            "tok_s_per_core": 1e6 / cpu_per_1k if cpu_per_1k > 0 else math.nan,
            "cpu_ms_per_1k": cpu_per_1k,
            "in_flight": num(col(row, "in flight")),
            "in_flight_source": "server log" if col(row, "in flight") else "n/a",
            "ttft_err_p50": num(sched, 0),
            "ttft_err_p99": num(sched, 1),
            "note": "",
        }
        print(json.dumps(out))
    return 0


# ---------------------------------------------------------------------------- table


def fmt(x, digits=0):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:,.{digits}f}"


def median(rows, key):
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float)) and not math.isnan(r[key])]
    return statistics.median(vals) if vals else math.nan


def cmd_table(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    order = {"bench360": 0, "aiperf": 1, "guidellm": 2}
    groups = {}
    for r in rows:
        groups.setdefault((r["client"], int(r["streams"])), []).append(r)
    print(
        "| client | streams | runs | requests ok (failed) | streamed tok/s "
        "| tok/s per client core | in flight held | TTFT error p50 / p99 ms "
        "| client CPU ms / 1000 tokens |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    notes = []
    for (client, streams), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], order.get(kv[0][0], 9))):
        if all(r.get("skipped") for r in rs):
            print(f"| {client} | {streams} | 0 | not run (see below) | | | | | |")
            notes.append((client, streams, rs[0].get("note", "not run")))
            continue
        rs = [r for r in rs if not r.get("skipped")]
        sources = sorted({r.get("in_flight_source", "") for r in rs} - {""})
        held = fmt(median(rs, "in_flight"), 1)
        if sources and sources != ["server log"] and held != "n/a":
            held += " (client)"
        print(
            f"| {client} | {streams} | {len(rs)} | {fmt(median(rs, 'requests'))} "
            f"({fmt(median(rs, 'failed'))}) | {fmt(median(rs, 'tok_s'))} "
            f"| {fmt(median(rs, 'tok_s_per_core'))} | {held} "
            f"| {fmt(median(rs, 'ttft_err_p50'), 1)} / {fmt(median(rs, 'ttft_err_p99'), 1)} "
            f"| {fmt(median(rs, 'cpu_ms_per_1k'), 2)} |"
        )
        for r in rs:
            if r.get("note"):
                notes.append((client, streams, r["note"]))
        late = [r.get("server_late_p99") for r in rs]
        late = [x for x in late if isinstance(x, (int, float)) and not math.isnan(x)]
        if late and max(late) > 5:
            notes.append(
                (client, streams, f"the server itself fell behind its script (p99 of send - schedule up to {max(late):.1f} ms)")
            )
    if notes:
        # One line per distinct note, with the stream counts it applies to.
        merged = {}
        for client, streams, text in notes:
            merged.setdefault((order.get(client, 9), client, text), []).append(streams)
        print()
        for (_, client, text), streams in sorted(merged.items(), key=lambda kv: (kv[0][0], min(kv[1]))):
            at = ", ".join(str(x) for x in sorted(set(streams)))
            print(f"- {client} at {at} streams: {text}")
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "sample" and len(args) == 2:
        return cmd_sample(int(args[0]), args[1])
    if cmd == "measure" and len(args) == 8:
        client, run_dir, streams, tokens, ttft_ms, itl_ms, server_log, cpu = args
        return cmd_measure(
            client, run_dir, int(streams), int(tokens), float(ttft_ms), float(itl_ms), server_log, cpu
        )
    if cmd == "skip" and len(args) == 3:
        return cmd_skip(*args)
    if cmd == "selfbench" and len(args) == 1:
        return cmd_selfbench(args[0])
    if cmd == "table" and len(args) == 1:
        return cmd_table(args[0])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
