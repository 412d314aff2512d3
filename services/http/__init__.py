"""The HTTP API as one app: the factory that mounts the read routes of ``services.read_api`` and the
command routes, the command routes themselves, and the API's process.

``app`` (the composition root: every router, one ``ApiState``), ``commands`` (the routes of the write
side over ``services.commands``), ``server`` (the process ``claimlog serve api`` runs). It sits above
``services.read_api`` and ``services.commands``, which never import it. Modules here may import
``events``, ``projections`` and the other packages of ``services``; not ``services.cli``.
"""

from services.http.app import create_app

__all__ = ["create_app"]
