"""Lease owners (`host:pid:start`) and the staleness rules, each with a yes and a no case."""

from __future__ import annotations

import math
import os
import socket
from datetime import datetime, timedelta

import psutil
import pytest

from nasctl.leases import (
    LEASE_STALE_SECONDS,
    SERVICE_STALE_SECONDS,
    LeaseOwner,
    experiment_lease_stale,
    experiment_stale_after,
    heartbeat_stale,
    host_name,
    lease_stale,
    owner_alive,
    owner_dead,
    owner_id,
    service_lease_stale,
)
from tests.helpers.leases import dead_owner

HOST = socket.gethostname()
NOW = datetime(2026, 11, 1, 12, 0, 0)


# --- the owner's text ----------------------------------------------------------------
def test_owner_id_names_this_process_and_parses_back() -> None:
    text = owner_id()
    owner = LeaseOwner.parse(text)
    assert owner.host == HOST and owner.pid == os.getpid()
    assert owner.started is not None and abs(owner.started - psutil.Process().create_time()) < 0.001
    assert str(owner) == text
    assert text == f"{HOST}:{os.getpid()}:{psutil.Process().create_time():.3f}"


def test_parse_reads_older_and_damaged_owners_without_raising() -> None:
    assert LeaseOwner.parse("h:12") == LeaseOwner("h", 12, None)
    assert LeaseOwner.parse("h:12:100.5") == LeaseOwner("h", 12, 100.5)
    assert LeaseOwner.parse("h:x:100.5") == LeaseOwner("h", None, 100.5)
    assert LeaseOwner.parse("h") == LeaseOwner("h", None, None)
    odd = LeaseOwner.parse("h:12:later")
    assert odd.pid == 12 and odd.started is not None and math.isnan(odd.started)


# --- is the owner alive? -------------------------------------------------------------
def test_owner_alive_yes_for_this_process() -> None:
    assert owner_alive(owner_id()) is True
    assert owner_alive(f"{HOST}:{os.getpid()}") is True  # no start time recorded: the pid decides


def test_owner_alive_no_for_an_ended_process_of_this_host() -> None:
    assert owner_alive(dead_owner()) is False


def test_owner_alive_no_for_a_reused_pid() -> None:
    started = psutil.Process().create_time()
    assert owner_alive(f"{HOST}:{os.getpid()}:{started - 5:.3f}") is False  # same pid, another process
    assert owner_alive(f"{HOST}:{os.getpid()}:later") is False  # a start time no process has


def test_owner_alive_unknown_elsewhere_or_without_a_pid() -> None:
    assert owner_alive(f"not-{HOST}:{os.getpid()}:0") is None
    assert owner_alive(f"{HOST}:pid:0") is None


# --- the rules -----------------------------------------------------------------------
def test_heartbeat_stale_yes_once_old_enough_or_missing() -> None:
    assert heartbeat_stale(NOW - timedelta(seconds=30), 30, NOW)
    assert heartbeat_stale(NOW - timedelta(hours=1), 30, NOW)
    assert heartbeat_stale(None, 30, NOW)


def test_heartbeat_stale_no_while_fresh() -> None:
    assert not heartbeat_stale(NOW - timedelta(seconds=29.9), 30, NOW)
    assert not heartbeat_stale(NOW, 30, NOW)


def test_owner_dead_yes_only_when_known_dead() -> None:
    assert owner_dead(dead_owner())
    assert owner_dead("h:1:0", lambda owner: False)


def test_owner_dead_no_when_alive_unknown_or_unchecked() -> None:
    assert not owner_dead(owner_id())
    assert not owner_dead(f"not-{HOST}:1:0")  # another host: cannot tell, so not dead
    assert not owner_dead("h:1:0", lambda owner: None)
    assert not owner_dead("h:1:0", None)


def test_lease_stale_yes_when_free_old_or_its_owner_is_dead() -> None:
    assert lease_stale(None, None, 30, now=NOW)
    assert lease_stale("", NOW, 30, now=NOW)
    assert lease_stale("h:1:0", NOW - timedelta(seconds=31), 30, now=NOW, is_alive=lambda owner: True)
    assert lease_stale("h:1:0", None, 30, now=NOW, is_alive=lambda owner: True)
    assert lease_stale(dead_owner(), NOW, 30, now=NOW)  # the default check: a process of this host


def test_lease_stale_no_while_fresh_and_not_known_dead() -> None:
    assert not lease_stale(owner_id(), NOW, 30, now=NOW)
    assert not lease_stale(f"not-{HOST}:1:0", NOW, 30, now=NOW)  # elsewhere: the heartbeat decides
    assert not lease_stale("h:1:0", NOW - timedelta(seconds=10), 30, now=NOW, is_alive=None)


def test_lease_stale_asks_about_the_owner_only_while_its_heartbeat_is_fresh() -> None:
    asked: list[str] = []

    def is_alive(owner: str) -> bool:
        asked.append(owner)
        return True

    assert lease_stale("h:1:0", NOW - timedelta(seconds=60), 30, now=NOW, is_alive=is_alive)
    assert asked == []
    assert not lease_stale("h:1:0", NOW, 30, now=NOW, is_alive=is_alive)
    assert asked == ["h:1:0"]


@pytest.mark.parametrize("text", ["h:1:0.000", "h:1", "h::12.500"])
def test_owner_text_round_trips(text: str) -> None:
    assert str(LeaseOwner.parse(text)) == text


# --- the host name this process gives itself ------------------------------------------
def test_nasctl_hostname_names_this_process_in_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NASCTL_HOSTNAME", "pod-7")
    assert host_name() == "pod-7"
    assert owner_id().startswith(f"pod-7:{os.getpid()}:")
    assert LeaseOwner.parse(owner_id()).on_this_host and owner_alive(owner_id()) is True
    # this machine's own name is now another host: its owners can no longer be checked
    assert not LeaseOwner.parse(f"{HOST}:{os.getpid()}:0").on_this_host
    assert owner_alive(dead_owner()) is None


def test_without_nasctl_hostname_the_host_name_is_the_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NASCTL_HOSTNAME", raising=False)
    assert host_name() == HOST
    monkeypatch.setenv("NASCTL_HOSTNAME", "")  # empty: not set
    assert host_name() == HOST and owner_alive(dead_owner()) is False


# --- the service's lease ----------------------------------------------------------------
def test_service_lease_stale_yes_when_free_old_or_its_owner_is_dead() -> None:
    assert service_lease_stale(None, None, now=NOW)
    assert service_lease_stale(f"not-{HOST}:1:0", NOW - timedelta(seconds=SERVICE_STALE_SECONDS), now=NOW)
    assert service_lease_stale(dead_owner(), NOW, now=NOW)  # this host, gone: at once


def test_service_lease_stale_no_while_a_live_or_unknown_owner_beats() -> None:
    fresh = NOW - timedelta(seconds=SERVICE_STALE_SECONDS - 0.5)
    assert not service_lease_stale(f"not-{HOST}:1:0", fresh, now=NOW)  # another host: its heartbeat decides
    assert not service_lease_stale(owner_id(), fresh, now=NOW)  # alive on this host
    assert not service_lease_stale(f"{HOST}:pid:0", fresh, now=NOW)  # no pid to check


def test_the_service_lease_goes_stale_before_an_experiment_lease() -> None:
    assert SERVICE_STALE_SECONDS < LEASE_STALE_SECONDS <= 30


# --- an experiment lease, as the service judges it -----------------------------------------
def test_experiment_stale_after_is_shorter_for_a_replaced_service() -> None:
    assert experiment_stale_after("a:1:0", {"a:1:0"}) == SERVICE_STALE_SECONDS


def test_experiment_stale_after_is_the_usual_for_anyone_else() -> None:
    assert experiment_stale_after("b:2:0", {"a:1:0"}) == LEASE_STALE_SECONDS
    assert experiment_stale_after("a:1:0") == LEASE_STALE_SECONDS
    assert experiment_stale_after(None, {"a:1:0"}) == LEASE_STALE_SECONDS


def test_experiment_lease_stale_yes() -> None:
    replaced = {"a:1:0"}
    # a replaced service's experiment, its heartbeat missing as long as the service's
    assert experiment_lease_stale("a:1:0", NOW - timedelta(seconds=SERVICE_STALE_SECONDS), replaced_services=replaced,
                                  now=NOW)
    # anyone's, after the usual time; a dead owner on this host at once; a free lease
    assert experiment_lease_stale("b:2:0", NOW - timedelta(seconds=LEASE_STALE_SECONDS), replaced_services=replaced,
                                  now=NOW)
    assert experiment_lease_stale(dead_owner(), NOW, now=NOW)
    assert experiment_lease_stale(None, None, now=NOW)


def test_experiment_lease_stale_no() -> None:
    replaced = {"a:1:0"}
    # the replaced service's orchestrator still beats (only its supervisor stalled)
    assert not experiment_lease_stale("a:1:0", NOW - timedelta(seconds=SERVICE_STALE_SECONDS - 1),
                                      replaced_services=replaced, now=NOW)
    # another owner elsewhere, older than the service's limit but not the usual one
    assert not experiment_lease_stale("b:2:0", NOW - timedelta(seconds=SERVICE_STALE_SECONDS + 5),
                                      replaced_services=replaced, now=NOW)
    # a live orchestrator of this host
    assert not experiment_lease_stale(owner_id(), NOW, replaced_services=replaced, now=NOW)
