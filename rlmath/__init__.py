"""Pure RL math (torch only): log-prob convention, losses, advantages."""
