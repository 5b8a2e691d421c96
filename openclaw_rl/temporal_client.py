"""The one Temporal client factory every process uses (pydantic data converter, the deployment's TLS and key)."""

from __future__ import annotations

import dataclasses

from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import TLSConfig

from openclaw_rl import tracing
from openclaw_rl.encryption import EncryptionCodec, Keyring
from openclaw_rl.search_attributes import SEARCH_ATTRIBUTES
from openclaw_rl.settings import TemporalSettings


def tls_config(temporal: TemporalSettings) -> TLSConfig | bool:
    """What `Client.connect(tls=...)` takes: False on plain loopback, else the CA, client certificate and name."""
    if not temporal.uses_tls:
        return False

    def read(path) -> bytes | None:
        return path.expanduser().read_bytes() if path is not None else None

    return TLSConfig(
        server_root_ca_cert=read(temporal.tls_ca_path),
        client_cert=read(temporal.tls_cert_path),
        client_private_key=read(temporal.tls_key_path),
        domain=temporal.tls_server_name,
    )


async def connect(temporal: TemporalSettings, runtime: Runtime | None = None, keyring: Keyring | None = None) -> Client:
    """`runtime`: a worker pool's own (its metrics endpoint); None: the SDK's default. `keyring`
    (`Settings.keyring()`): payloads encrypted with it; every process of a deployment must pass the same."""
    return await Client.connect(
        temporal.target(),
        namespace=temporal.namespace,
        api_key=temporal.api_key.get_secret_value() or None,
        tls=tls_config(temporal),
        data_converter=data_converter(keyring),
        runtime=runtime,
        interceptors=tracing.temporal_interceptors(),  # the client's and its workers' (a trace across processes)
    )


def data_converter(keyring: Keyring | None) -> DataConverter:
    """The pydantic converter, with `EncryptionCodec` when there is a keyring."""
    if keyring is None:
        return pydantic_data_converter
    return dataclasses.replace(pydantic_data_converter, payload_codec=EncryptionCodec(keyring))


def metrics_runtime(bind_address: str, pool: str) -> Runtime:
    """An SDK runtime that serves Prometheus metrics on `bind_address`: the SDK's own and those the pool's
    activities record (`activity.metric_meter()`), every series tagged with the pool."""
    return Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=bind_address), global_tags={"pool": pool})
    )


async def ensure_search_attributes(client: Client, namespace: str) -> list[str]:
    """Register the project's search attributes if missing; returns the names added."""
    existing = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in existing.custom_attributes}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    return sorted(missing)
