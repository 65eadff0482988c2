"""Print how close the capacity planner comes to real vLLM start-up figures.

Usage: .venv/bin/python benchmarks/capacity_accuracy.py [tests/data/vllm_startup_cases.yaml]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from mcp_tools.capacity.accuracy import evaluate, summary


def main() -> None:
    table = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).parent.parent / "tests/data/vllm_startup_cases.yaml"
    )
    results = evaluate(table)
    for name, attr in (
        ("KV tokens (end to end)", "kv_tokens_error"),
        ("weights", "weights_error"),
        ("KV budget (available memory)", "available_error"),
        ("KV tokens from vLLM's own budget", "layout_error"),
        ("KV needed for one request", "kv_needed_error"),
        ("estimated max_model_len", "max_len_error"),
    ):
        errs = [(r.id, getattr(r, attr)) for r in results if getattr(r, attr) is not None]
        if not errs:
            continue
        values = [e for _, e in errs]
        print(
            f"{name}: {len(errs)} cases, median error {statistics.median(values):.1%}, max {max(values):.1%}"
        )
        for case_id, err in errs:
            print(f"    {case_id:40s} {err:7.1%}")
    print(summary(results))


if __name__ == "__main__":
    main()
