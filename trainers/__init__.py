"""Trainer backends: `torch` (CPU or one GPU) now; `megatron` (the optional extra) for multi-GPU."""
