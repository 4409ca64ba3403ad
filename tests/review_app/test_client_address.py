"""The address a sign-in counts against: ``X-Forwarded-For`` only from a configured proxy.

docs/security.md, "Passwords and sign-in".
"""

from __future__ import annotations

import ipaddress
import re

import pytest

from review_app.config import LOOPBACK_NETWORKS, get_settings
from review_app.services.authentication import LOCAL_CLIENT, client_key


def _trusted(*items: str) -> tuple:
    return tuple(ipaddress.ip_network(item, strict=False) for item in items)


def test_a_client_on_the_private_network_cannot_choose_its_address_by_header():
    for forged in ("203.0.113.7", "10.9.9.9", "127.0.0.1", "10.1.2.3, 198.51.100.4"):
        assert client_key("10.1.2.3", forged, LOOPBACK_NETWORKS) == "10.1.2.3"
    assert client_key("192.168.4.20", "8.8.8.8", LOOPBACK_NETWORKS) == "192.168.4.20"
    assert client_key("10.1.2.3", None, LOOPBACK_NETWORKS) == "10.1.2.3"


def test_a_proxy_on_this_host_names_the_client_by_its_last_entry():
    """nginx appends the address it saw; the entries before it came from the client."""
    header = "198.51.100.4, 10.1.2.3"
    assert client_key(None, header, LOOPBACK_NETWORKS) == "10.1.2.3"  # Streamlit reports loopback as None
    assert client_key("127.0.0.1", header, LOOPBACK_NETWORKS) == "10.1.2.3"
    assert client_key("127.0.1.1", header, LOOPBACK_NETWORKS) == "10.1.2.3"
    assert client_key("::1", header, LOOPBACK_NETWORKS) == "10.1.2.3"
    assert client_key("::ffff:127.0.0.1", header, LOOPBACK_NETWORKS) == "10.1.2.3"  # IPv4 on an IPv6 socket
    assert client_key(None, None, LOOPBACK_NETWORKS) == LOCAL_CLIENT  # someone on this host, no proxy


def test_a_configured_proxy_network_is_believed_and_only_it():
    trusted = _trusted("10.0.0.0/24", "192.168.7.2")
    assert client_key("10.0.0.7", "203.0.113.1, 10.1.2.3", trusted) == "10.1.2.3"
    assert client_key("192.168.7.2", "10.1.2.3", trusted) == "10.1.2.3"
    assert client_key("10.0.1.7", "10.1.2.3", trusted) == "10.0.1.7"  # next network over: a client
    assert client_key("192.168.7.3", "10.1.2.3", trusted) == "192.168.7.3"
    # The setting replaces the default: loopback is believed only when listed.
    assert client_key(None, "10.1.2.3", trusted) == LOCAL_CLIENT
    assert client_key("127.0.0.1", "10.1.2.3", trusted) == "127.0.0.1"


@pytest.mark.parametrize(
    "header",
    ["", "unknown", "10.1.2.3, unknown", "10.1.2.3,", "10.1.2.3, 10.1.2.4:5555", "10.1.2.3, _hidden", " , "],
)
def test_a_last_entry_that_is_no_address_leaves_the_proxys_own(header):
    """What a client put before an unusable entry is never taken instead."""
    assert client_key("10.0.0.7", header, _trusted("10.0.0.0/24")) == "10.0.0.7"
    assert client_key(None, header, LOOPBACK_NETWORKS) == LOCAL_CLIENT


def test_ipv6_peers_proxies_and_clients():
    trusted = _trusted("2001:db8:a::/64", "::1")
    assert client_key("2001:db8:a::5", "2001:db8:f::9", trusted) == "2001:db8:f::9"
    assert client_key("2001:db8:a::5", "10.1.2.3, 2001:DB8:F:0:0::9", trusted) == "2001:db8:f::9"  # one spelling
    assert client_key("2001:db8:a::5", "::ffff:10.1.2.3", trusted) == "10.1.2.3"
    assert client_key("2001:db8:b::5", "2001:db8:f::9", trusted) == "2001:db8:b::5"  # not the proxy
    assert client_key("2001:DB8:B::5", None, trusted) == "2001:db8:b::5"
    assert client_key("fe80::1", "2001:db8:f::9", LOOPBACK_NETWORKS) == "fe80::1"  # link-local is a client too
    assert client_key(None, "2001:db8:f::9", trusted) == "2001:db8:f::9"  # ::1 listed


def test_the_setting_lists_addresses_and_networks(monkeypatch):
    monkeypatch.delenv("MEDREV_TRUSTED_PROXIES", raising=False)
    assert get_settings().trusted_proxies == LOOPBACK_NETWORKS
    monkeypatch.setenv("MEDREV_TRUSTED_PROXIES", "  ")
    assert get_settings().trusted_proxies == LOOPBACK_NETWORKS
    monkeypatch.setenv("MEDREV_TRUSTED_PROXIES", " 10.0.0.5, 10.1.0.0/16 ,::1,2001:db8::/48,10.2.0.9/24")
    assert [str(network) for network in get_settings().trusted_proxies] == [
        "10.0.0.5/32",
        "10.1.0.0/16",
        "::1/128",
        "2001:db8::/48",
        "10.2.0.0/24",
    ]


@pytest.mark.parametrize("value", ["nginx.local", "10.0.0.0/33", "10.0.0.1 10.0.0.2", ",", "10.0.0.1;10.0.0.2"])
def test_a_setting_medrev_cannot_use_is_refused_naming_it(value, monkeypatch, tmp_path):
    from review_app.db.connect import open_database
    from review_app.db.errors import DatabaseUnavailable

    monkeypatch.setenv("MEDREV_TRUSTED_PROXIES", value)
    message = f"^MEDREV_TRUSTED_PROXIES must list addresses or networks .*got {re.escape(repr(value))}$"
    with pytest.raises(ValueError, match=message):
        get_settings()
    with pytest.raises(DatabaseUnavailable, match="MEDREV_TRUSTED_PROXIES must list addresses or networks"):
        open_database(f"sqlite:///{tmp_path / 'app.db'}")
