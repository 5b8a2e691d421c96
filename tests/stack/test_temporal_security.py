"""Temporal connection options for a deployment: API key, TLS, mTLS; refused where they cannot apply; masked."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from temporalio.service import TLSConfig

from openclaw_rl.settings import Settings, TemporalSettings
from openclaw_rl.temporal_client import tls_config


def test_plain_loopback_by_default():
    assert tls_config(TemporalSettings()) is False


def test_an_api_key_turns_tls_on_and_is_masked():
    s = Settings(temporal={"address": "ns.acct.tmprl.cloud:7233", "api_key": "tk-123", "namespace": "ns.acct"})
    assert isinstance(tls_config(s.temporal), TLSConfig)
    assert "tk-123" not in str(s.masked())


def test_mtls_reads_the_certificate_files(tmp_path):
    for name in ("ca.pem", "client.pem", "client.key"):
        (tmp_path / name).write_bytes(f"-----{name}-----".encode())
    t = TemporalSettings(
        address="temporal.internal:7233",
        tls_ca_path=tmp_path / "ca.pem",
        tls_cert_path=tmp_path / "client.pem",
        tls_key_path=tmp_path / "client.key",
        tls_server_name="temporal.internal",
    )
    cfg = tls_config(t)
    assert isinstance(cfg, TLSConfig)
    assert cfg.server_root_ca_cert == b"-----ca.pem-----" and cfg.client_private_key == b"-----client.key-----"
    assert cfg.domain == "temporal.internal"


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({"api_key": "k"}, "existing cluster"),  # the embedded dev server has no TLS
        ({"address": "t:7233", "tls_cert_path": "/c.pem"}, "go together"),
    ],
)
def test_options_that_cannot_work_are_refused_with_a_reason(fields, reason):
    with pytest.raises(ValidationError, match=reason):
        TemporalSettings(**fields)
