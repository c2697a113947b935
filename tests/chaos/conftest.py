"""Chaos test size: `--long` (an option of tests/conftest.py) scales kills and records up; the default
keeps CI short."""

from __future__ import annotations

import pytest


@pytest.fixture
def chaos_size(request: pytest.FixtureRequest) -> dict[str, int]:
    """How much chaos: SIGKILLs to deliver (direct and spark-submit runs) and the producer pace."""
    if request.config.getoption("--long"):
        return {"kills": 120, "spark_kills": 4, "batch": 12}
    return {"kills": 20, "spark_kills": 1, "batch": 4}  # at least 20 SIGKILLs + a Spark one
