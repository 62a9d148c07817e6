"""Fixtures of the tests that need real servers (marker `services`): PostgreSQL, Redis with Celery
workers, and an S3-compatible server (moto), all on loopback, started by scripts/services.sh
(`scripts/test.sh -m services` starts and stops them). A server that does not answer fails the
test; it never skips. Helpers are in nm_services.py (imported by module name).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import nm_services  # noqa: E402


@pytest.fixture(scope="session")
def services() -> nm_services.Services:
    return nm_services.find_services()


@pytest.fixture
def pg_database(services):
    url = nm_services.create_database(services)
    yield url
    nm_services.drop_database(services, url)


@pytest.fixture
def s3_bucket(services) -> str:
    return nm_services.create_bucket(services)
