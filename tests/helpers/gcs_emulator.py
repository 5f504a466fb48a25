"""A loopback-only Cloud Storage stand-in that TensorFlow's own gs:// client can talk to.

TensorFlow's GCS filesystem (gcs_file_system.cc in libtensorflow_framework) has no emulator
setting: the endpoints https://www.googleapis.com/storage/v1/, .../upload/storage/v1/ and
https://storage.googleapis.com/ (reads) are compiled in. What it does honour:

* GOOGLE_AUTH_TOKEN_FOR_TESTING: a fixed bearer token, so no credentials or metadata server;
* CURL_CA_BUNDLE: the CA file its bundled libcurl verifies servers against;
* https_proxy / http_proxy / no_proxy, which libcurl reads itself.

So the test side runs two servers on 127.0.0.1:

* `gcp-storage-emulator` (PyPI), in memory, speaking the JSON API over plain HTTP;
* a small HTTPS-intercepting proxy: it answers `CONNECT www.googleapis.com:443` (or
  storage.googleapis.com), terminates TLS with a certificate for those names signed by a
  throwaway CA, and forwards each decrypted request to the emulator. It refuses every other
  destination and every plain-HTTP request, so nothing leaves the loopback interface.

What the proxy changes on the way, each because the emulator falls short of the real service
in a way TensorFlow 2.21 trips over (found by running it; see the functions for details):

* request framing: libcurl uploads with `Transfer-Encoding: chunked` *and* a Content-Length
  header; the body is de-chunked (the emulator would read Content-Length bytes of chunk framing);
* `Location` of a resumable upload: the emulator answers `http://www.googleapis.com/...`, the
  service https; rewritten to https (else libcurl would try plain HTTP for the upload itself);
* an empty `uploadType=media` upload (how TensorFlow creates `dir/` markers) crashes the
  emulator; it is sent as the equivalent `uploadType=multipart` upload;
* `GET /storage/v1/b/BUCKET/storageLayout` (which TensorFlow asks before renaming a directory)
  does not exist in the emulator; the proxy answers it as GCS does for a bucket without
  hierarchical namespace;
* access control: a request without a bearer token gets GCS's 401, and one for a bucket passed
  to `deny()` its 403, so errors users meet without credentials or permissions can be tested.

Known remaining difference: the emulator ignores `ifGenerationMatch=0` (TensorFlow's makedirs
checks for the marker first, so this does not change what the tests see).
"""

import datetime
import http.client
import json
import os
import re
import socket
import socketserver
import ssl
import threading
import urllib.parse
import weakref
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gcp_storage_emulator.server import create_server

GOOGLE_HOSTS = ("www.googleapis.com", "storage.googleapis.com")
LOOPBACK = "127.0.0.1"
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "expect",
    "content-length",
}


def _free_port():
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def write_certificates(directory):
    """(ca.pem, server cert.pem, server key.pem): a throwaway CA and a cert for GOOGLE_HOSTS."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    valid = dict(not_valid_before=now - datetime.timedelta(days=1), not_valid_after=now + datetime.timedelta(days=2))

    def name(common_name):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(name("vbt test CA"))
        .issuer_name(name("vbt test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid["not_valid_before"])
        .not_valid_after(valid["not_valid_after"])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(GOOGLE_HOSTS[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid["not_valid_before"])
        .not_valid_after(valid["not_valid_after"])
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in GOOGLE_HOSTS]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = tuple(os.path.join(directory, n) for n in ("ca.pem", "server.pem", "server.key"))
    pem = serialization.Encoding.PEM
    with open(paths[0], "wb") as f:
        f.write(ca_cert.public_bytes(pem))
    with open(paths[1], "wb") as f:
        f.write(cert.public_bytes(pem))
    with open(paths[2], "wb") as f:
        f.write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return paths


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60  # an idle keep-alive tunnel cannot hold a thread forever

    def log_request(self, code="-", size="-"):
        if self.command != "CONNECT":
            self.server.requests.append((self.command, getattr(self, "tunnel_host", None), self.path, int(code)))

    def log_message(self, format, *args):
        pass

    def do_CONNECT(self):
        host, _, port = self.path.rpartition(":")
        if host not in GOOGLE_HOSTS or port != "443":
            self.server.refused.append(self.path)
            self.send_error(403, "this test proxy only reaches the local emulator")
            self.close_connection = True
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()
        # From here on the same handler loop reads HTTP requests from inside the TLS tunnel.
        tls = self.server.tls.wrap_socket(self.connection, server_side=True)
        self.server.track(tls)
        self.connection = tls
        self.rfile = tls.makefile("rb", self.rbufsize)
        self.wfile = socketserver._SocketWriter(tls)
        self.tunnel_host = host
        self.close_connection = False

    def finish(self):
        super().finish()
        if getattr(self, "tunnel_host", None):
            self.connection.close()  # the TLS socket; socketserver closes only the one it accepted

    def _forward(self):
        if not getattr(self, "tunnel_host", None):
            # Plain-HTTP proxying (e.g. http://metadata.google.internal) is refused, never forwarded.
            self.server.refused.append(f"{self.command} {self.path}")
            self.send_error(403, "this test proxy only reaches the local emulator")
            self.close_connection = True
            return
        body = self._read_body()
        if self._refuse_access():
            return
        layout = _STORAGE_LAYOUT.fullmatch(urllib.parse.urlsplit(self.path).path)
        if self.command == "GET" and layout:
            return self._storage_layout(layout.group(1))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        path, body, headers = _empty_media_upload_as_multipart(self.command, self.path, body, headers)
        upstream = http.client.HTTPConnection(LOOPBACK, self.server.emulator_port, timeout=60)
        try:
            upstream.request(self.command, path, body=body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            status, reason, out_headers = response.status, response.reason, response.getheaders()
        except (OSError, http.client.HTTPException) as e:  # the emulator crashed on this request
            status, reason, out_headers = 502, "Bad Gateway", [("Content-Type", "text/plain")]
            payload = f"emulator failed: {e!r}".encode()
        finally:
            upstream.close()
        self.send_response(status, reason)
        for key, value in out_headers:
            if key.lower() in _HOP_BY_HOP or key.lower() in ("server", "date"):
                continue
            if key.lower() == "location":
                value = _https(value)
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def _refuse_access(self) -> bool:
        """GCS's access control, which the emulator lacks: 401 for a request without a bearer
        token, 403 for a bucket in `denied_buckets` (bodies as the service sends them)."""
        path = urllib.parse.urlsplit(self.path).path
        match = _JSON_BUCKET.match(path) if self.tunnel_host == "www.googleapis.com" else _XML_BUCKET.match(path)
        bucket = match.group(1) if match else None
        if "Authorization" not in self.headers:
            status, message = (
                401,
                "Anonymous caller does not have storage.objects.get access to the Google Cloud Storage object.",
            )
        elif bucket in self.server.denied_buckets:
            status, message = (
                403,
                (
                    "caller@example.iam.gserviceaccount.com does not have storage.objects.get "
                    "access to the Google Cloud Storage object. Permission 'storage.objects.get' "
                    "denied on resource (or it may not exist)."
                ),
            )
        else:
            return False
        data = json.dumps({"error": {"code": status, "message": message}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        return True

    def _storage_layout(self, bucket):
        """buckets.getStorageLayout, which the emulator lacks and TensorFlow needs: since TF 2.21,
        renaming a directory first asks whether the bucket has a hierarchical namespace (and fails
        on any error). Answer as GCS does for an ordinary bucket: no hierarchicalNamespace."""
        conn = http.client.HTTPConnection(LOOPBACK, self.server.emulator_port, timeout=60)
        try:
            conn.request("GET", f"/storage/v1/b/{bucket}")
            response = conn.getresponse()
            resource = json.loads(response.read() or b"{}") if response.status == 200 else None
        finally:
            conn.close()
        if resource is None:
            status, payload = 404, {"error": {"code": 404, "message": "The specified bucket does not exist."}}
        else:
            status, payload = (
                200,
                {
                    "kind": "storage#storageLayout",
                    "bucket": bucket,
                    "location": resource.get("location", "US"),
                    "locationType": resource.get("locationType", "multi-region"),
                },
            )
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _read_body(self):
        # Transfer-Encoding wins over Content-Length (RFC 9112 6.3); libcurl sends uploads chunked.
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = self.headers.get("Content-Length")
        return self.rfile.read(int(length)) if length else b""

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward


_STORAGE_LAYOUT = re.compile(r"/storage/v1/b/([-.\w]+)/storageLayout")


_JSON_BUCKET = re.compile(r"(?:/upload)?/storage/v1/b/([^/]+)")
_XML_BUCKET = re.compile(r"/([^/]+)")


def _empty_media_upload_as_multipart(method, path, body, headers):
    """gcp-storage-emulator crashes on `uploadType=media` with an empty body (TypeError on
    len(None)), which is how TensorFlow creates `dir/` markers (makedirs). Send the same
    upload -- same name, same empty content, same query -- as `uploadType=multipart` instead."""
    parts = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if method != "POST" or body or ("uploadType", "media") not in query:
        return path, body, headers
    query = [(k, "multipart" if k == "uploadType" else v) for k, v in query]
    name = dict(query)["name"]
    content_type = headers.get("Content-Type") or "application/octet-stream"
    boundary = "vbt-test-boundary"
    body = (
        f"--{boundary}\r\nContent-Type: application/json\r\n\r\n{json.dumps({'name': name})}\r\n"
        f"--{boundary}\r\nContent-Type: {content_type}\r\n\r\n\r\n--{boundary}--\r\n"
    ).encode()
    headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    headers["Content-Type"] = f"multipart/related; boundary={boundary}"
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query))), body, headers


def _https(url):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "http" and parts.hostname in GOOGLE_HOSTS:
        return urllib.parse.urlunsplit(("https", parts.hostname, parts.path, parts.query, parts.fragment))
    return url


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins every connection thread

    def __init__(self, emulator_port, tls):
        super().__init__((LOOPBACK, 0), _ProxyHandler)
        self.emulator_port, self.tls = emulator_port, tls
        self.requests, self.refused = [], []
        self.denied_buckets = set()  # answered 403, like a bucket the caller has no role on
        self._open = weakref.WeakSet()
        self._lock = threading.Lock()

    def track(self, sock):
        with self._lock:
            self._open.add(sock)

    def process_request(self, request, client_address):
        self.track(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self._lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self):
        with self._lock:
            socks = list(self._open)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class GcsEmulator:
    """Emulator + proxy, both on 127.0.0.1; `env` is what a process needs to use them via tf.io.gfile."""

    def __init__(self, workdir, bucket="vbt-test"):
        self.workdir, self.bucket = str(workdir), bucket
        self._threads = []

    def start(self):
        self.ca, cert, key = write_certificates(self.workdir)
        before = set(threading.enumerate())
        try:
            return self._start(cert, key)
        except BaseException:
            self._threads = [t for t in threading.enumerate() if t not in before]
            self.stop()
            raise

    def _start(self, cert, key):
        before = set(threading.enumerate())
        self.emulator_port = _free_port()
        self._emulator = create_server(LOOPBACK, self.emulator_port, in_memory=True, default_bucket=self.bucket)
        self._emulator.start()
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        tls.set_alpn_protocols(["http/1.1"])
        proxy = _ProxyServer(self.emulator_port, tls)
        try:
            threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.1}, name="gcs-test-proxy").start()
        except BaseException:
            proxy.server_close()
            raise
        self._proxy, self.proxy_port = proxy, proxy.server_address[1]
        self._threads = [t for t in threading.enumerate() if t not in before]
        return self

    def stop(self):
        proxy, emulator = getattr(self, "_proxy", None), getattr(self, "_emulator", None)
        if proxy is not None:
            proxy.shutdown()
            proxy.close_connections()
            proxy.server_close()  # joins the per-connection threads
        if emulator is not None:
            emulator.stop()
        for thread in self._threads:
            threading.Thread.join(thread, timeout=10)  # APIThread overrides join(); call the real one
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            raise RuntimeError(f"GCS emulator threads still running: {alive}")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def requests(self):
        """(method, host, path, status) of every request TensorFlow sent, in order."""
        return list(self._proxy.requests)

    @property
    def refused(self):
        """Destinations other than the emulator that a client tried to reach (none, normally)."""
        return list(self._proxy.refused)

    def deny(self, bucket):
        """Requests for `bucket` get GCS's 403 from now on."""
        self._proxy.denied_buckets.add(bucket)

    @property
    def env(self):
        proxy = f"http://{LOOPBACK}:{self.proxy_port}"
        return {
            "https_proxy": proxy,
            "HTTPS_PROXY": proxy,
            "http_proxy": proxy,
            "HTTP_PROXY": proxy,
            "ALL_PROXY": proxy,
            "all_proxy": proxy,
            "no_proxy": "",
            "NO_PROXY": "",
            "CURL_CA_BUNDLE": self.ca,
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator-token",
            "NO_GCE_CHECK": "true",
            "GCS_RESOLVE_REFRESH_SECS": "0",
            # Fail fast instead of TensorFlow's default ten retries with back-off.
            "GCS_RETRY_CONFIG_MAX_RETRIES": "1",
            "GCS_REQUEST_CONNECTION_TIMEOUT_SECS": "20",
        }

    # Direct access to the emulator (plain HTTP on loopback), independent of TensorFlow.
    def _request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection(LOOPBACK, self.emulator_port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def put(self, name, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        status, body = self._request(
            "POST", f"/upload/storage/v1/b/{self.bucket}/o?{query}", data, {"Content-Type": "application/octet-stream"}
        )
        assert status == 200, body
        return f"gs://{self.bucket}/{name}"

    def get(self, name):
        quoted = urllib.parse.quote(name, safe="")
        status, body = self._request("GET", f"/storage/v1/b/{self.bucket}/o/{quoted}?alt=media")
        if status == 404:
            raise FileNotFoundError(f"gs://{self.bucket}/{name}")
        assert status == 200, body
        return body

    def names(self, prefix=""):
        query = urllib.parse.urlencode({"prefix": prefix})
        status, body = self._request("GET", f"/storage/v1/b/{self.bucket}/o?{query}")
        assert status == 200, body
        return sorted(item["name"] for item in json.loads(body).get("items") or [])
