"""Rebuilding the read models into a new generation of tables while the old one keeps serving, then switching.

``replay`` drives a rebuild, ``parallel`` and ``worker`` split a large one across processes, ``some`` picks
the projections to fold again, ``diff`` compares two generations, ``generations`` keeps the table sets and
which one is active, ``bulk_build`` builds indexes once at the end. Modules here may import ``events``,
``projections``, ``services.log``, ``services.projector`` and ``services.runtime``; not ``services.cli``.
"""
