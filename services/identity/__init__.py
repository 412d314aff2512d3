"""Who may write, and as whom: actors and their bearer tokens (``actors``), the key registry that says
which signing key speaks for which actor (``keys``), when a token stops working (``expiry``), and the
shared per-actor write limit (``rate_limit``).

Stands on ``services/log/`` (the key-value buckets these live in, their names, signing) and
``events/``; below the write side, the projector and the HTTP app, which ask it who an actor is.
"""
