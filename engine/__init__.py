"""The embedded policy engine: a Hugging Face causal LM behind SGLang's native HTTP API."""
