"""Assertion helpers shared by the bad-input tests."""


class raises:  # noqa: N801  (a context manager used like pytest.raises)
    """pytest.raises that also checks every fragment appears in the message."""

    def __init__(self, exc, *fragments):
        self.exc, self.fragments = exc, fragments

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        assert exc_type is not None, f"expected {self.exc.__name__}, nothing was raised"
        assert issubclass(exc_type, self.exc), f"expected {self.exc.__name__}, got {exc_type.__name__}: {exc}"
        for fragment in self.fragments:
            assert fragment in str(exc), (fragment, str(exc))
        return True
