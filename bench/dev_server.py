"""The Temporal dev server as `up` starts it (its dynamic config, our search attributes), for the benchmarks that
run real workflows against modelled activity pools (`bench fairness`, `bench deploy`)."""

from __future__ import annotations

from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from openclaw_rl.search_attributes import SEARCH_ATTRIBUTES
from stack.preflight import find_temporal_binary
from stack.services import DEV_SERVER_DYNAMIC_CONFIG


async def start_dev_server(extra_config: dict[str, str] | None = None) -> WorkflowEnvironment:
    """A fresh in-memory dev server; `extra_config`: dynamic config on top of `up`'s. Shut it down when done."""
    config = DEV_SERVER_DYNAMIC_CONFIG | (extra_config or {})
    extra = [a for k, v in config.items() for a in ("--dynamic-config-value", f"{k}={v}")]
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        search_attributes=[],
        dev_server_existing_path=str(find_temporal_binary()),
        dev_server_extra_args=extra + ["--log-level", "error"],
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(namespace=env.client.namespace, search_attributes=SEARCH_ATTRIBUTES)
    )
    return env
