"""The read API: claim pages, listings and health, served from the read models.

Its routers, queries and pages; the app that mounts them with the command routes is ``services.http``'s.
"""
