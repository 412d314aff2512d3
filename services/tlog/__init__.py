"""The transparency log over the claim log: the log key, the integrator that sequences every stored
message into an RFC 6962 tree of C2SP tiles, and what reads the stored tree back.

It imports ``tlog/`` (the formats), ``events/`` (the entry encoding), ``services/log/`` (the stream and the
tree's storage) and ``services/runtime/``; ``services/http/`` serves it and ``services/orchestration/`` runs it.
"""
