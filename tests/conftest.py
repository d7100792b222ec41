"""Suite-wide pytest options.

`--runslow`: tests marked `slow` (full training runs and the like) are skipped unless it is given,
so the default suite stays fast enough for CI on 2 cores.
"""
import pytest


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked 'slow'")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: pass --runslow to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
