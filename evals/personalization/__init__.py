"""Personalization held-out sets: generated word problems (student) and grading tasks (teacher), asked as a user
asks them, scored by the rule scorer on the paper's scale; the personalization benchmark (`bench.personalization`)
serves the same problems to its simulated users and scores its table with the same scorer."""
