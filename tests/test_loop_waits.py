"""How the loop waits for an operation: never longer than allowed, never started without time left."""
from agentrun.loop import _wait_for
from agentrun.waiting import Finished, Raised, TimedOut


def test_an_operation_with_no_time_left_is_never_started():
    started = []
    result = _wait_for(lambda: started.append(1), 0, by_deadline=True)
    assert isinstance(result.result, TimedOut) and result.by_deadline
    assert started == []


def test_an_operation_in_time_returns_its_value_or_its_error():
    assert _wait_for(lambda: 42, 1.0, by_deadline=False).result == Finished(42)
    error = ValueError("backend down")

    def fail():
        raise error

    assert _wait_for(fail, 1.0, by_deadline=False).result == Raised(error)


def test_a_slow_operation_is_cut_at_the_wait():
    import threading

    release = threading.Event()
    result = _wait_for(lambda: release.wait(5), 0.05, by_deadline=False)
    release.set()
    assert isinstance(result.result, TimedOut) and not result.by_deadline
