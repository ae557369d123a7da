"""``scripts/bench failover``: failover within a voice session, per kind of fault (``bench``)."""
