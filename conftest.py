"""Both suites (tests/, bench/tests/) run with none of deepgp's behaviour switches set: a user's DEEPGP_DEBUG
(tracebacks instead of one-line errors), DEEPGP_FLOAT32_PRODUCTS, DEEPGP_CAPTURE, DEEPGP_SETTLE_HEAP or
DEEPGP_MEMORY_LIMIT would change what the tests check; a test that wants one sets it. DEEPGP_DATA, where
the data sets are, stays."""

import os

SWITCHES = ("DEEPGP_DEBUG", "DEEPGP_FLOAT32_PRODUCTS", "DEEPGP_CAPTURE", "DEEPGP_SETTLE_HEAP", "DEEPGP_MEMORY_LIMIT")


def pytest_configure(config):
    for name in SWITCHES:
        os.environ.pop(name, None)
