"""The low layer every process stands on: its settings, its database and its NATS.

``settings`` (every ``CLAIMLOG_*`` setting), ``db`` (engines and migrations), ``compose`` (the log and the
database opened from one ``Settings``), and the NATS ``compose`` may have to start and reach: ``embedded``
(the nats-server of the wheel), ``cluster`` (the data directory's local cluster), ``local_ca`` (its
certificate authority), ``nats_roles`` (the users and their permissions), ``processes``. Modules here may
import ``events``, ``projections``, ``services.log`` and the modules beside it (``services.identity.actors``,
``services.identity.keys``); nothing of the packages that run on it. Running the processes as one (``claimlog
up``) is ``services.orchestration``'s.
"""
