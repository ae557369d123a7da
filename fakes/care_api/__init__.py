"""The example care API that the example HTTP tools (``tools/care_api_*``) call: appointments of
the patient named by the caller's token (``book``), over aiohttp with a request log and forced
faults for tests (``server``). Run it with ``python -m fakes.care_api --port 8090 --jwt-secret
SECRET``."""

from fakes.care_api.book import AppointmentBook
from fakes.care_api.server import FakeCareApi, Fault, LoggedRequest

__all__ = ["AppointmentBook", "FakeCareApi", "Fault", "LoggedRequest"]
