"""The CPU layout's preflight: what fits, how quotas scale, what is refused and why."""

from __future__ import annotations

import pytest

from lblab.errors import ConfigError
from lblab.loadtests.isolation import MIN_QUOTA, default_harness_cpus, plan_layout

QUICK = {"s1": 0.25, "s2": 0.25, "s3": 1.0}


def test_quotas_that_fit_run_as_given() -> None:
    layout = plan_layout({"s1": 0.25, "s2": 0.5}, method="affinity", machine_cpus=[0, 1])
    assert layout.harness_cpus == (0,) and layout.server_cpus == (1,)
    assert layout.quota_scale == 1.0
    assert layout.quotas == {"s1": 0.25, "s2": 0.5}


def test_quotas_that_do_not_fit_are_scaled_by_one_factor_keeping_their_ratios() -> None:
    layout = plan_layout(QUICK, method="affinity", machine_cpus=[0, 1])
    assert layout.quota_scale == pytest.approx(2 / 3)
    assert sum(layout.quotas.values()) == pytest.approx(1.0)  # the server set's one CPU
    assert layout.quotas["s3"] / layout.quotas["s1"] == pytest.approx(4.0)
    assert layout.given == QUICK
    assert "scaled by 0.667" in layout.describe()
    facts = layout.facts()
    assert facts["quotas_given"] == QUICK and facts["server_cpus"] == [1]


def test_a_third_of_the_machine_goes_to_the_harness() -> None:
    assert [default_harness_cpus(n) for n in (2, 3, 4, 8, 16)] == [1, 1, 1, 3, 5]
    layout = plan_layout(QUICK, method="affinity", machine_cpus=range(8))
    assert layout.harness_cpus == (0, 1, 2) and layout.server_cpus == (3, 4, 5, 6, 7)
    assert layout.quota_scale == 1.0


@pytest.mark.parametrize(
    ("quotas", "kwargs", "words"),
    [
        (QUICK, {"machine_cpus": [0]}, ["at least 2 CPUs", 'isolation = "off"']),
        (QUICK, {"machine_cpus": [0, 1], "harness_cpus": 2}, ["harness_cpus = 2", "1 to 1"]),
        ({"s1": 0.01, "s2": 4.0}, {"machine_cpus": [0, 1]}, ["s1 would get", "needs about"]),
        (QUICK, {"method": "sometimes"}, ["not one of auto, cpuset, affinity, off"]),
    ],
)
def test_what_cannot_fit_is_refused_with_what_would(
    quotas: dict, kwargs: dict, words: list[str]
) -> None:
    with pytest.raises(ConfigError) as err:
        plan_layout(quotas, **{"method": "affinity", **kwargs})
    for word in words:
        assert word in str(err.value)


def test_a_refused_small_quota_names_a_machine_that_fits() -> None:
    with pytest.raises(ConfigError) as err:
        plan_layout({"s1": 0.01, "s2": 4.0}, method="affinity", machine_cpus=[0, 1])
    needed = int(str(err.value).split("needs about ")[1].split()[0])
    assert needed == 6  # 4.01 CPUs of quotas, unscaled, and the harness's one
    layout = plan_layout(
        {"s1": 0.01, "s2": 4.0}, method="affinity", machine_cpus=range(needed), harness_cpus=1
    )
    assert layout.quotas == {"s1": 0.01, "s2": 4.0}  # on that machine they run as given
    with pytest.raises(ConfigError):  # and one CPU fewer does not do
        plan_layout(
            {"s1": 0.01, "s2": 4.0}, method="affinity", machine_cpus=range(5), harness_cpus=1
        )


def test_a_scaled_quota_may_not_fall_below_the_minimum() -> None:
    layout = plan_layout({"s1": 0.1, "s2": 1.9}, method="affinity", machine_cpus=[0, 1])
    assert layout.quotas["s1"] == pytest.approx(MIN_QUOTA)
    with pytest.raises(ConfigError, match=r"s1 would get 0\.048"):
        plan_layout({"s1": 0.1, "s2": 2.0}, method="affinity", machine_cpus=[0, 1])


def test_off_shares_every_cpu_and_keeps_the_quotas() -> None:
    layout = plan_layout(QUICK, method="off", machine_cpus=[0])
    assert not layout.isolated and layout.quotas == QUICK
    assert layout.server_cpus == layout.harness_cpus == (0,)


def test_a_server_without_a_quota_shares_the_server_set_unscaled() -> None:
    layout = plan_layout({"s1": None, "s2": None, "s3": None}, method="affinity",
                         machine_cpus=[0, 1])  # fmt: skip
    assert layout.quota_scale == 1.0 and layout.quotas == {"s1": None, "s2": None, "s3": None}
    mixed = plan_layout({"s1": None, "s2": 1.5}, method="affinity", machine_cpus=[0, 1])
    assert mixed.quotas == {"s1": None, "s2": 1.0}  # the limited one scaled to the set
