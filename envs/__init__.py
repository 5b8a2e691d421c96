"""General-agent environments (terminal, tool-call, ...): one package each behind the protocol in `envs.base`,
found through the registry in `envs.registry`; `envs.sandbox` owns isolation and limits."""
