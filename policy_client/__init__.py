"""Token-in/token-out client for policy servers (embedded engine, SGLang server or router)."""

from policy_client.client import Generation, PolicyClient, PolicyRequestError, PolicyUnavailableError
from policy_client.wire import SamplingParams

__all__ = ["Generation", "PolicyClient", "PolicyRequestError", "PolicyUnavailableError", "SamplingParams"]
