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


@pytest.fixture
def dr_size(request: pytest.FixtureRequest) -> dict[str, dict[str, int]]:
    """DR chaos (test_dr_chaos.py): round trips per replication policy and the most replicate runs
    between two incidents; `--long`: more of both."""
    if request.config.getoption("--long"):
        return {"identity": {"round_trips": 8, "steady_runs": 5}, "default": {"round_trips": 4, "steady_runs": 5}}
    return {"identity": {"round_trips": 2, "steady_runs": 3}, "default": {"round_trips": 1, "steady_runs": 3}}


@pytest.fixture
def net_size(request: pytest.FixtureRequest) -> dict[str, int]:
    """Network faults (test_network_faults.py): records copied under resets and how many resets;
    `--long`: ten times more of both."""
    if request.config.getoption("--long"):
        return {"records": 9000, "resets": 60}
    return {"records": 900, "resets": 6}
