"""How the loop waits for an operation: never longer than allowed, never started without time left."""

import threading

from engine.loop import _wait_for
from engine.waiting import Finished, Raised, TimedOut, call_with_timeout, operations_settle


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


def test_an_idle_operation_thread_is_reused_and_a_busy_one_is_not():
    assert operations_settle(15)  # no operation of an earlier test comes back idle in between
    first = call_with_timeout(threading.get_ident, 5)
    second = call_with_timeout(threading.get_ident, 5)
    assert isinstance(first, Finished) and first == second  # the same thread ran both

    release = threading.Event()
    stuck_on = []
    assert isinstance(
        call_with_timeout(lambda: (stuck_on.append(threading.get_ident()), release.wait(5)), 0.05), TimedOut
    )
    meanwhile = call_with_timeout(threading.get_ident, 5)
    assert meanwhile.value != stuck_on[0]  # the thread still busy with the abandoned call was not handed this one
    release.set()
    assert operations_settle(5)
