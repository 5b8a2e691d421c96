"""`openclaw-rl up`: start, supervise and stop the whole local stack."""
