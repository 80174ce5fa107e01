import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


def pytest_collection_modifyitems(items):
    """A test module's UNSUPPORTED_CASES {node id fragment: reason} skips the matching cases, with the reason
    (test_pad_numpy_suite.py runs numpy's own suite and lists what torch cannot hold). Tests marked `large` (several
    GB each) form one pytest-xdist group: under `-n N --dist loadgroup` one worker runs them one after another."""
    for item in items:
        if item.get_closest_marker("large") is not None:
            item.add_marker(pytest.mark.xdist_group("large"))
        for fragment, reason in getattr(item.module, "UNSUPPORTED_CASES", {}).items():
            if fragment in item.nodeid:
                item.add_marker(pytest.mark.skip(reason=reason))
