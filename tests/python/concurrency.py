"""A helper shared by the tests that run calls in threads."""

import threading
import time


def run_for(seconds: float, stop: threading.Event, *targets) -> None:
    """Starts one thread per target (a function of no arguments, looping until `stop` is set), lets them run for
    `seconds`, then sets `stop` and joins them all."""
    threads = [threading.Thread(target=target) for target in targets]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
