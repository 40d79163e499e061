"""Backends by name: a name is taken once, lazy entries import on demand, class paths load users' own classes."""

from __future__ import annotations

import pytest

from ads_core.common.registry import DuplicateBackendError, Registry, UnknownBackendError


def test_a_second_registration_under_one_name_raises_and_keeps_the_first():
    reg = Registry("widget")

    @reg.register("a")
    class First:
        pass

    with pytest.raises(DuplicateBackendError, match="widget 'a' is already registered"):

        @reg.register("a")
        class Second:
            pass

    with pytest.raises(DuplicateBackendError):
        reg.register("a", "collections:OrderedDict")
    assert reg.get("a") is First


def test_lazy_entries_and_class_paths_load_on_demand():
    reg = Registry("widget")
    reg.register("ordered", "collections:OrderedDict")
    import collections

    assert reg.get("ordered") is collections.OrderedDict
    assert reg.get("collections.Counter") is collections.Counter  # a user's class by dotted path
    assert reg.names() == ["ordered"]
    with pytest.raises(UnknownBackendError, match="unknown widget 'nope'; choose one of auto, ordered"):
        reg.get("nope")
    with pytest.raises(UnknownBackendError, match="cannot be imported"):
        reg.get("no_such_module_xyz:Thing")
