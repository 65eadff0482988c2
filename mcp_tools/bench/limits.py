"""The bench client's bounds, importable without the bench (the CLI reads them at start-up)."""

#: The most in-flight requests one bench client opens (a load level, --max-concurrency).
MAX_CONCURRENCY = 4096
#: The highest request rate (req/s) of a rate sweep.
MAX_RATE = 10_000.0
