"""The factor every wait of a Python test is multiplied by: TESSERA_TEST_TIME_SCALE (at least
1, at most 100; scripts/test.sh raises it under the sanitizers and on a loaded host), as
tests/support.hpp's time_scale() does for the C++ tests. A wait's bound is a hang guard, never
the assertion."""

import os


def scale():
    try:
        f = float(os.environ.get("TESSERA_TEST_TIME_SCALE", "1"))
    except ValueError:
        return 1.0
    return f if 1 <= f <= 100 else 1.0


def scaled(seconds):
    """`seconds` times the suite's time scale."""
    return seconds * scale()
