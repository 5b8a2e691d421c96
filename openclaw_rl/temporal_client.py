"""The one Temporal client factory every process uses (pydantic data converter)."""

from __future__ import annotations

from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from openclaw_rl.search_attributes import SEARCH_ATTRIBUTES
from openclaw_rl.settings import TemporalSettings


async def connect(temporal: TemporalSettings) -> Client:
    return await Client.connect(temporal.target(), namespace=temporal.namespace, data_converter=pydantic_data_converter)


async def ensure_search_attributes(client: Client, namespace: str) -> list[str]:
    """Register the project's search attributes if missing; returns the names added."""
    existing = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in existing.custom_attributes}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    return sorted(missing)
