"""Sandbox benchmarks: start-up time and listing 10,000 log entries through a filter.

    .venv/bin/python benchmarks/bench_sandbox.py [--starts 15] [--lists 7]

Prints medians (targets: start < 1 s, listing 10,000 entries < 200 ms).
"""

from __future__ import annotations

import argparse
import statistics
import time

from _support import count


def _seed(sb, matching: int, other: int) -> None:
    from sandbox.cloudlogging.model import STDERR, STDOUT, run_resource

    res = run_resource(sb.project, sb.location, "bench", "bench-00001-abc")
    t0 = sb.clock.now_s() - 3600
    for i in range(matching + other):
        hit = i % (matching + other) < matching if other == 0 else (i % 2 == 0 and i // 2 < matching)
        sb.logs.append(
            project=sb.project,
            log_id=STDERR if hit else STDOUT,
            timestamp=t0 + i * 0.01,
            severity="ERROR" if hit else "INFO",
            text=f"(EngineCore_DP0 pid=230) line {i} torch.OutOfMemoryError: CUDA out of memory"
            if hit
            else f"INFO line {i}",
            resource=res,
        )


def _next_token(body: bytes) -> str | None:
    i = body.rfind(b'"nextPageToken":"')
    if i < 0:
        return None
    j = body.index(b'"', i + 17)
    return body[i + 17 : j].decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--starts", type=count, default=15)
    ap.add_argument("--lists", type=count, default=7)
    a = ap.parse_args()

    t = time.perf_counter()
    from sandbox.server import start_sandbox

    sb = start_sandbox()
    cold = time.perf_counter() - t
    sb.stop()
    starts = []
    for _ in range(a.starts):
        t = time.perf_counter()
        sb = start_sandbox()
        starts.append(time.perf_counter() - t)
        sb.stop()
    scen = []
    for _ in range(max(3, a.starts // 3)):
        t = time.perf_counter()
        sb = start_sandbox(scenario="reference-weights-oom")
        scen.append(time.perf_counter() - t)
        sb.stop()
    print(
        f"sandbox start (empty): median {statistics.median(starts) * 1000:.1f} ms over {a.starts} "
        f"(first start in a fresh process, imports included: {cold * 1000:.0f} ms)"
    )
    print(
        f"sandbox start (scenario reference-weights-oom): median {statistics.median(scen) * 1000:.1f} ms "
        f"over {len(scen)}"
    )

    from sandbox.testing import logging_client

    sb = start_sandbox()
    try:
        _seed(sb, matching=10_000, other=10_000)
        client = logging_client(sb)
        filt = (
            'resource.type="cloud_run_revision" AND resource.labels.service_name="bench" '
            'AND severity>=ERROR AND textPayload:"out of memory"'
        )
        import httpx

        http = httpx.Client(base_url=sb.url)
        store_times, client_times, http_times = [], [], []
        for _ in range(a.lists):
            t = time.perf_counter()
            n, token = 0, None
            while True:  # what the HTTP handler does: filter, page, build the response body
                body_bytes = sb.logs.list_entries_json(
                    resource_names=[f"projects/{sb.project}"], filter_=filt, page_size=1000, page_token=token
                )
                n += body_bytes.count(b'"insertId"')
                token = _next_token(body_bytes)
                if not token:
                    break
            store_times.append(time.perf_counter() - t)
            assert n == 10_000, n
            t = time.perf_counter()
            got = sum(1 for _ in client.list_entries(filter_=filt, page_size=1000))
            client_times.append(time.perf_counter() - t)
            assert got == 10_000, got
            t = time.perf_counter()
            n, tok = 0, None
            while True:
                body = {"resourceNames": [f"projects/{sb.project}"], "filter": filt, "pageSize": 1000}
                if tok:
                    body["pageToken"] = tok
                page = http.post("/v2/entries:list", json=body).json()
                n += len(page.get("entries", []))
                tok = page.get("nextPageToken")
                if not tok:
                    break
            http_times.append(time.perf_counter() - t)
            assert n == 10_000, n
        print(
            f"list 10,000 matching entries of 20,000 through a filter (10 pages of 1000): "
            f"server-side (filter + response bodies) median {statistics.median(store_times) * 1000:.1f} ms; "
            f"over HTTP (JSON decoded) median {statistics.median(http_times) * 1000:.1f} ms; "
            f"through google-cloud-logging "
            f"(LogEntry objects built) median {statistics.median(client_times) * 1000:.1f} ms "
            f"(over {a.lists})"
        )
    finally:
        sb.stop()


if __name__ == "__main__":
    main()
