"""HTTP tools: a tool folder whose ``schema.json`` has an ``http`` section and no ``handler.py``.

The gateway makes the request itself; nothing of the tool folder is imported. The pieces, from
the pure core outwards:

- ``section``: the section as the artifact records it (``HttpToolSection``), and the endpoint it
  points at in this process's environment (``resolve_endpoint``: available or not, and why);
- ``request_plan``: arguments → one request (URL, query, JSON body), pure;
- ``response_mapping``: the API's answer → the tool envelope (status → error type, messages,
  ``partialSideEffects``, Retry-After), pure;
- ``shared_client``: the one ``aiohttp.ClientSession`` every HTTP tool uses, and its close hook
  (``close_shared_http_client``, called when the app shuts down);
- ``executor``: ``HttpToolHandler``, the async shell that sends the request under the tool's
  deadline and reads a bounded answer.

This package imports no submodule here, so the build (``registry_build``) can read ``section``
without loading the HTTP client.
"""

__all__: list[str] = []
