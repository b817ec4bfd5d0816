"""RequestView and Outcome: the values both drivers hand to the strategies.

They were NamedTuples and are plain classes now (compiled, a C struct each:
``lblab/balancer/strategies/base.py``); what callers relied on stays: defaults,
equality and hashing by value, pickling and copying, and the replay copy."""

from __future__ import annotations

import copy
import pickle

from lblab.balancer.strategies.base import Interaction, Outcome, RequestView, next_attempt


def test_defaults_and_equality_by_value() -> None:
    view = RequestView(7)
    assert (view.interaction, view.package_bytes, view.routing_key) == (
        Interaction.REQUEST_RESPONSE, 0, None,
    )  # fmt: skip
    assert (view.client_address, view.exclude, view.attempt) == (None, frozenset(), 0)
    assert view == RequestView(request_id=7) and hash(view) == hash(RequestView(7))
    assert view != RequestView(8) and view != (7,)
    assert "request_id=7" in repr(view)


def test_pickled_and_copied_values_are_equal() -> None:
    view = RequestView(3, Interaction.REQUEST_STREAM, 120, b"k", "10.0.0.1", frozenset({"a"}), 1)
    outcome = Outcome(False, 12.5, "timeout", server_fault=True)
    for value in (view, outcome):
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.copy(value) == value and copy.deepcopy(value) == value


def test_a_replay_excludes_every_backend_that_refused_and_stops_at_the_limit() -> None:
    first = RequestView(1, package_bytes=100, routing_key=b"k")
    second = next_attempt(first, "a")
    assert second is not None and second.exclude == {"a"} and second.attempt == 1
    assert (second.request_id, second.package_bytes, second.routing_key) == (1, 100, b"k")
    third = next_attempt(second, "b")
    assert third is not None and third.exclude == {"a", "b"} and third.attempt == 2
    assert next_attempt(third, "c") is None
    assert first.exclude == frozenset() and first.attempt == 0  # the original is unchanged


def test_an_outcome_counts_toward_ejection_only_for_the_backends_own_faults() -> None:
    assert Outcome(False, 1.0, "timeout").backend_fault
    assert Outcome(False, 1.0, "connection").backend_fault
    assert Outcome(False, 1.0, "application", server_fault=True).backend_fault
    assert not Outcome(False, 1.0, "application").backend_fault
    assert not Outcome(False, 1.0, "rejected").backend_fault
    assert not Outcome(True, 1.0).backend_fault
