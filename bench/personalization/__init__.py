"""The paper's Table 3 (section 5.3), reproducible on a laptop.

A small base policy that follows a style instruction and otherwise mixes styles (`basemodel`), simulated users who
want one style (`users`), and the driver that runs the real stack with them and reports the table, a learning curve
and a JSON (`runner`). The problems, the answer styles and the scorer of first answers on the paper's
0/0.25/0.5/0.75/1 scale are product code, shared with scheduled evaluation: `evals.personalization`.
"""
