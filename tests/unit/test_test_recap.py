"""The recap that ends scripts/test names each failed test from pytest's own JUnit report."""

import subprocess
import sys
from pathlib import Path

from mirrorflow_dev.test_recap import recap


def test_the_recap_names_failures_and_errors_with_their_first_message_line(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "@pytest.fixture\n"
        "def broken():\n"
        "    raise RuntimeError('fixture broke')\n"
        "def test_ok():\n"
        "    assert True\n"
        "def test_bad():\n"
        "    assert 1 == 2, 'one is not two'\n"
        "def test_broken(broken):\n"
        "    pass\n"
        "@pytest.mark.skip(reason='later')\n"
        "def test_later():\n"
        "    pass\n"
    )
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", str(report), str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    lines = recap(report, done.returncode).splitlines()
    assert lines[0].startswith("== recap: 1 passed, 1 failed, 1 errors, 1 skipped in ")
    assert lines[0].endswith("(pytest exit status 1)")
    assert len(lines) == 3
    assert lines[1].startswith("FAILED test_sample::test_bad (")
    assert "one is not two" in lines[1]
    assert lines[2].startswith("ERROR test_sample::test_broken (")
    assert "fixture broke" in lines[2]


def test_a_run_that_wrote_no_report_says_so(tmp_path: Path) -> None:
    text = recap(tmp_path / "missing.xml", 4)
    assert text == "== recap: pytest wrote no report (exit status 4); its own output above is all there is"
