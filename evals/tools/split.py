"""The blind split of the real corpus, fixed before any analyzer was tuned against it.

An incident is blind when ``sha256(SEED + ":" + id)`` read as a number falls in the lowest
``BLIND_PERCENT`` percent. The rule depends on the id alone, so adding incidents never moves an
existing one between splits. Files live in ``evals/real/dev/`` and ``evals/real/blind/``;
``python -m evals.tools.split evals/real`` checks that every file is where the rule puts it
(``--move`` puts it there), and ``tests`` run the same check.

Nobody tunes an analyzer against ``evals/real/blind/``: read its cases' scores, never its logs, while
changing the diagnosis.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import yaml

SEED = "gemma-sre-blind-v1"
BLIND_PERCENT = 36
SPLITS = ("dev", "blind")


def split_of(incident_id: str) -> str:
    h = int(hashlib.sha256(f"{SEED}:{incident_id}".encode()).hexdigest()[:8], 16)
    return "blind" if h % 100 < BLIND_PERCENT else "dev"


def read_yaml(path: Path) -> Any:
    """A corpus file's YAML, read with libyaml's safe loader when PyYAML has it (ten times the pure-Python
    one's speed on the corpus: the check reads every file)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def misplaced(root: Path) -> list[tuple[Path, str]]:
    """(file, the split it belongs to) for every real incident outside its split's folder."""
    out = []
    for f in sorted(root.rglob("*.yaml")):
        try:
            data = read_yaml(f)
            incident_id = str(data["id"])
        except (yaml.YAMLError, OSError, UnicodeDecodeError, TypeError, KeyError) as e:
            raise BadIncident(f"{f}: not an incident with an id ({type(e).__name__}: {e})") from e
        want = split_of(incident_id)
        if f.parent.name != want:
            out.append((f, want))
    return out


class BadIncident(ValueError):
    """A file under the corpus that is not an incident the split can place."""


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path("evals/real")
    try:
        bad = misplaced(root)
    except BadIncident as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if "--move" in argv:
        for f, want in bad:
            (root / want).mkdir(parents=True, exist_ok=True)
            f.rename(root / want / f.name)
        return 0
    for f, want in bad:
        print(f"{f}: belongs in {root / want}/")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
