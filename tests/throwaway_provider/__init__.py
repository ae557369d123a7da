"""A provider that exists only for the tests: its transport folder (``transport.py``, an echo
upstream) and its record (``record.py``), and nothing else. Registering the record
(``PROVIDERS.registered(ECHO)``) is all the gateway needs to serve sessions on it
(``tests/integration/test_a_provider_is_a_transport_and_a_record.py``)."""

from throwaway_provider.record import ECHO, ECHO_MODEL
from throwaway_provider.transport import EchoTransport

__all__ = ["ECHO", "ECHO_MODEL", "EchoTransport"]
