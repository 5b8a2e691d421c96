"""Pure RL math: log-prob convention and losses on torch tensors; advantages in plain Python (float32 rounding)."""
