"""The last lines of a test run: pytest's verdict, read back from its JUnit report.

CI shows only the end of a run's output. Whatever prints after pytest's own summary (the regression guard,
a librdkafka client logging that its cluster has gone) must not hide which tests failed, so `scripts/test`
ends with this recap. Usage: ``python -m mirrorflow_dev.test_recap REPORT.xml PYTEST_EXIT_STATUS``.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

MESSAGE_CHARS = 300


@dataclass(frozen=True)
class Outcome:
    test: str
    verdict: str  # "failed" or "error"
    seconds: float
    message: str


def outcomes(report: Path) -> tuple[dict[str, int], float, list[Outcome]]:
    """Counts by verdict, the run's seconds, and the tests that did not pass."""
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {"tests": 0, "failed": 0, "error": 0, "skipped": 0}
    seconds = 0.0
    bad: list[Outcome] = []
    for suite in suites:
        seconds = max(seconds, float(suite.get("time", 0) or 0))
        for case in suite.iter("testcase"):
            counts["tests"] += 1
            test = f"{case.get('classname', '')}::{case.get('name', '')}"
            for verdict, tag in (("failed", "failure"), ("error", "error")):
                found = case.find(tag)
                if found is not None:
                    counts[verdict] += 1
                    message = (found.get("message") or found.text or "").strip().splitlines()
                    first = message[0][:MESSAGE_CHARS] if message else ""
                    bad.append(Outcome(test, verdict, float(case.get("time", 0) or 0), first))
            if case.find("skipped") is not None:
                counts["skipped"] += 1
    return counts, seconds, bad


def recap(report: Path, status: int) -> str:
    if not report.exists() or report.stat().st_size == 0:
        return f"== recap: pytest wrote no report (exit status {status}); its own output above is all there is"
    counts, seconds, bad = outcomes(report)
    passed = counts["tests"] - counts["failed"] - counts["error"] - counts["skipped"]
    lines = [
        f"== recap: {passed} passed, {counts['failed']} failed, {counts['error']} errors, "
        f"{counts['skipped']} skipped in {seconds:.0f} s (pytest exit status {status})"
    ]
    lines += [f"{o.verdict.upper()} {o.test} ({o.seconds:.0f} s) - {o.message}" for o in bad]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m mirrorflow_dev.test_recap REPORT.xml PYTEST_EXIT_STATUS", file=sys.stderr)
        return 2
    print(recap(Path(argv[0]), int(argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
