"""kernels.versions: a value derived from arrays is computed once per version of their memory,
and again after any in-place write the package makes, through any view, or when an array is
replaced or freed."""
import gc

import numpy as np
import pytest

from saliency.kernels import versions


class Counting:
    """fn(a) = 2 * a, counting its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, *arrays):
        self.calls += 1
        return sum(2 * a for a in arrays if a is not None)


def test_a_value_is_computed_once_until_its_array_is_written():
    w, fn = np.arange(6.0).reshape(2, 3), Counting()
    first = versions.derived("double", fn, w)
    assert versions.derived("double", fn, w) is first and fn.calls == 1
    assert not first.flags.writeable
    w[0, 0] = 10.0
    versions.bump(w)
    again = versions.derived("double", fn, w)
    assert fn.calls == 2 and again[0, 0] == 20.0


def test_a_write_through_any_view_is_seen_through_every_other():
    base, fn = np.zeros((4, 4)), Counting()
    top, bottom = base[:2], base[2:]
    assert versions.derived("double", fn, top).sum() == 0
    assert versions.derived("double", fn, bottom).sum() == 0
    writer = base.reshape(-1)[8:]  # the bottom half, through another view
    writer[:] = 1.0
    versions.bump(writer)
    assert versions.version(top) == versions.version(base) == 1
    assert versions.derived("double", fn, bottom).sum() == 16 and fn.calls == 3
    versions.derived("double", fn, top)
    assert fn.calls == 4  # same memory, so recomputed too (conservative, never stale)


def test_views_at_different_places_of_one_array_are_different_values():
    base, fn = np.arange(8.0), Counting()
    assert versions.derived("double", fn, base[:4])[0] == 0
    assert versions.derived("double", fn, base[4:])[0] == 8
    assert versions.derived("double", fn, base[::2])[1] == 4


def test_a_replaced_array_of_equal_shape_is_a_different_key():
    fn = Counting()
    a, b = np.ones(3), np.full(3, 5.0)
    assert versions.derived("double", fn, a)[0] == 2
    assert versions.derived("double", fn, b)[0] == 10
    assert fn.calls == 2


def test_names_and_none_arguments_are_part_of_the_key():
    a, fn = np.ones(3), Counting()
    versions.derived("one", fn, a, None)
    versions.derived("two", fn, a, None)
    versions.derived("one", fn, a, a)
    versions.derived("one", fn, a, None)
    assert fn.calls == 3


def test_a_freed_array_takes_its_values_with_it():
    versions.clear()
    a = np.ones(1000)
    versions.derived("double", Counting(), a)
    assert versions.held_bytes() == 8000
    del a
    gc.collect()
    assert versions.held_bytes() == 0


def test_beyond_the_budget_the_least_recently_used_go(monkeypatch):
    versions.clear()
    monkeypatch.setattr(versions, "BUDGET_BYTES", 2500)
    arrays, fn = [np.full(100, float(i)) for i in range(3)], Counting()  # 800 bytes of value each
    for a in arrays:
        versions.derived("double", fn, a)
    versions.derived("double", fn, arrays[0])  # now the most recent
    big = np.ones(400)
    versions.derived("double", fn, big)  # 3200 bytes: over the budget, computed but not kept
    assert fn.calls == 4 and versions.held_bytes() == 2400
    versions.derived("double", fn, np.ones(100))  # pushes out arrays[1], the least recent
    versions.derived("double", fn, arrays[0])
    versions.derived("double", fn, arrays[2])
    assert fn.calls == 5
    versions.derived("double", fn, arrays[1])
    assert fn.calls == 6
    versions.clear()


def test_a_value_sharing_its_input_memory_is_refused():
    a = np.ones(3)
    with pytest.raises(ValueError, match="shares memory"):
        versions.derived("same", lambda x: x[:2], a)
    assert a.flags.writeable


def test_versions_count_bumps_and_start_at_zero():
    a = np.zeros(2)
    assert versions.version(a) == 0
    versions.bump(a)
    versions.bump(a[1:])
    versions.bump(None)
    assert versions.version(a) == 2 and versions.version(a[:1]) == 2


def test_values_derived_from_derived_values_are_freed_with_them(monkeypatch):
    """A value that is the array of another (a folded weight and its Winograd tiles) is freed by
    an eviction, a recomputation or clear() while the cache is being changed: no deadlock, and
    the dependent value goes too."""
    import threading

    def chain():
        versions.clear()
        monkeypatch.setattr(versions, "BUDGET_BYTES", 10_000)
        w, fn = np.ones(100), Counting()
        folded = versions.derived("fold", fn, w)
        versions.derived("tiles", fn, folded)
        assert versions.held_bytes() == 1600
        del folded
        w[0] = 2.0
        versions.bump(w)
        versions.derived("tiles", fn, versions.derived("fold", fn, w))  # the old fold is freed
        assert versions.held_bytes() == 1600
        versions.derived("big", fn, np.ones(1200))  # evicts both; the tiles' array goes with the fold
        versions.clear()
        assert versions.held_bytes() == 0

    errors = []

    def run():
        try:
            chain()
        except Exception as exc:  # reported below, in the test's thread
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)  # a deadlocked worker must not keep the run alive
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive() and not errors, errors
