"""What the python tests of tests/llama share: the rule for a missing numpy."""
import os
import sys


def require_numpy():
    """Exits 77 (ctest: skipped) without numpy, or fails when CI is set."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            sys.exit("numpy is missing (Debian: python3-numpy) and CI is set: failing")
        print("numpy is missing: skipped")
        sys.exit(77)
