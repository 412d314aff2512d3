"""Running the processes, and the settings they run with.

``settings`` (every ``CLAIMLOG_*`` setting), ``db`` (engines and migrations), ``embedded`` (the nats-server of
the wheel), ``nats_roles`` (its users and their permissions), ``supervisor``, ``processes`` and ``up``
(``claimlog up``), ``compose`` (the log and the database opened from one ``Settings``). Modules here may
import ``events``, ``projections`` and the other packages of ``services``; not ``services.cli``.
"""
