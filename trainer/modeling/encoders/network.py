"""Whether a download host can be reached, decided in seconds.

Download libraries retry for minutes on an air-gapped machine (tensorflow_hub), or wait with no
timeout at all (huggingface_hub's default HTTP client has `timeout=None`,
huggingface_hub/utils/_http.py): one bounded connection attempt first tells "offline" quickly.
"""

import socket
import threading
import urllib.parse
import urllib.request

NETWORK_TIMEOUT_SECONDS = 5.0


def unreachable(url: str) -> str | None:
    """None when the URL's host (or the proxy in use for it) accepts a connection, else why not,
    with the address tried: "huggingface.co:443 (timed out)"."""
    parsed = urllib.parse.urlparse(url)
    proxy = urllib.request.getproxies().get(parsed.scheme)
    target = urllib.parse.urlparse(proxy) if proxy else parsed
    address = (target.hostname, target.port or (443 if target.scheme == "https" else 80))
    failure = ["timed out"]  # cleared by a successful connection

    def connect():
        try:
            socket.create_connection(address, timeout=NETWORK_TIMEOUT_SECONDS).close()
            failure.clear()
        except OSError as error:
            failure[0] = str(error)

    # A thread bounds the DNS lookup too, which socket timeouts do not cover.
    probe = threading.Thread(target=connect, daemon=True)
    probe.start()
    probe.join(NETWORK_TIMEOUT_SECONDS)
    return f"{address[0]} ({failure[0]})" if failure else None
