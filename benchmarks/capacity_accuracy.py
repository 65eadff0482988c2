"""Print how close the capacity planner comes to real vLLM start-up figures, on the dev and the
blind split (tests/data/vllm_startup_split.yaml; blind cases are never used to tune the planner).

    .venv/bin/python benchmarks/capacity_accuracy.py [--all] [tests/data/vllm_startup_cases.yaml]

Per-case rows are printed for the dev split only, unless --all (for the final report): whoever
changes the planner looks at dev cases, and at the blind split only in aggregate.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import yaml

from mcp_tools.capacity.accuracy import evaluate, load_cases, summary
from mcp_tools.errors import UserError

TABLE = Path(__file__).resolve().parent.parent / "tests/data/vllm_startup_cases.yaml"

CHECKS = (
    ("KV tokens (end to end)", "kv_tokens_error"),
    ("weights", "weights_error"),
    ("KV budget (available memory)", "available_error"),
    ("KV tokens from vLLM's own budget", "layout_error"),
    ("KV needed for one request", "kv_needed_error"),
    ("estimated max_model_len", "max_len_error"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("table", nargs="?", type=Path, default=TABLE, help="the start-up cases (YAML)")
    ap.add_argument("--all", action="store_true", help="per-case rows for the blind split too")
    a = ap.parse_args()
    table, show_blind = a.table, a.all
    try:
        cases = {c["id"]: c for c in load_cases(table)}
        results = evaluate(table)
    except OSError as e:
        ap.error(f"{table}: {e.strerror or e}")
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        ap.error(f"{table}: not valid YAML" + (f" (line {mark.line + 1})" if mark else ""))
    except (KeyError, TypeError) as e:
        ap.error(f"{table}: a case is not a start-up case ({e.__class__.__name__}: {e})")
    except UserError as e:
        ap.error(str(e))
    print(f"{len(results)} real start-ups ({table})")
    print(
        "| split | cases | KV tokens within 10% | median KV error | max over-prediction "
        "| low end <= vLLM | weights within 5% |"
    )
    print("|---|---|---|---|---|---|---|")
    for split in ("dev", "blind"):
        s = summary([r for r in results if r.split == split])
        print(
            f"| {split} | {s['kv_cases']} KV / {s['weight_cases']} weights | "
            f"{s['kv_within']}/{s['kv_cases']} "
            f"({(s['kv_within_share'] or 0):.0%}) | {(s['kv_median_error'] or 0):.1%} | "
            f"{s['kv_max_over_prediction']:+.1%} | {s['kv_low_end_safe']}/{s['kv_ranged']} | "
            f"{s['weights_within']}/{s['weight_cases']} |"
        )
    for name, attr in CHECKS:
        for split in ("dev", "blind"):
            errs = [r for r in results if r.split == split and getattr(r, attr) is not None]
            if not errs:
                continue
            values = [getattr(r, attr) for r in errs]
            print(
                f"{name} [{split}]: {len(errs)} cases, median error {statistics.median(values):.1%}, "
                f"max {max(values):.1%}"
            )
            if split == "blind" and not show_blind:
                continue
            for r in errs:
                signed = r.kv_tokens_signed if attr == "kv_tokens_error" else None
                shown = f"{signed:+7.1%}" if signed is not None else f"{getattr(r, attr):7.1%}"
                c = cases[r.id]
                print(f"    {r.id:40s} {shown}  vLLM {c.get('vllm_version') or 'current'}  {r.source}")


if __name__ == "__main__":
    main()
