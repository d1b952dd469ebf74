"""vit serve's HTTP as proxies and load balancers see it (ctest label `serve`): where a body ends
(Content-Length, a 401 before the body is read, none at all), 405 with Allow, Prometheus
label escaping, Triton's max_batch_size, TorchServe's multipart fields, bearer tokens and
flag values past what the server's clocks and counters hold. Raw sockets where urllib would
tidy the request."""
import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_serve as http  # noqa: E402  (its Server and helpers; not its tests)

KEY = "secret1"
AUTH = b"Authorization: Bearer " + KEY.encode() + b"\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(KEY + "\n")
    s = http.Server("--model", f"a={http.CK}", "--model", f'q"x\\y={http.CK}', "--max-batch", 4,
                    "--api-key-file", keys)
    yield s
    code, log = s.stop()
    assert code == 0, log


def exchange(server, data, seconds=1.0):
    """Every byte the server sends back for `data` on one connection within `seconds`."""
    host, port = server.url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=seconds) as s:
        s.sendall(data)
        out = b""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


def statuses(text):
    return [int(m) for m in re.findall(r"^HTTP/1\.1 (\d{3})", text, re.M)]


INNER = b"GET /v2/models/a/config HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Connection: close\r\n\r\n"


def test_a_body_whose_end_is_unknown_is_400_and_never_a_second_request(server):
    """cpp-httplib took Content-Length "abc" (or the first of two that differ) for 0, and the
    body's bytes then ran as a request of their own."""
    for headers, message in [(b"Content-Length: abc\r\n", "'abc' is not a number of bytes"),
                             (b"Content-Length: -1\r\n", "'-1' is not a number of bytes"),
                             (b"Content-Length: 0\r\nContent-Length: %d\r\n" % len(INNER), "disagree"),
                             # CL.TE: served by the chunks, with the connection kept open
                             (b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
                              "Content-Length and Transfer-Encoding together"),
                             (b"Transfer-Encoding: xchunked\r\n", "'xchunked': vit serve reads chunked bodies alone")]:
        got = exchange(server, b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n" + AUTH + headers + b"\r\n"
                       + INNER)
        assert statuses(got) == [400], got
        assert message in got and "Connection: close" in got, got


def test_a_401_closes_the_connection_so_its_body_is_not_read_as_a_request(server):
    got = exchange(server, b"POST /v2/models/a/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(INNER)
                   + INNER)
    assert statuses(got) == [401], got  # one answer: the body was not the next request
    assert "Connection: close" in got and "WWW-Authenticate: Bearer" in got, got
    # The scheme is case-insensitive (RFC 9110 section 11.1), the key is not.
    for scheme, want in (("bearer", 200), ("BEARER", 200), ("Bearer", 200)):
        assert http.call(server.url + "/v2/models/a", headers={"Authorization": f"{scheme} {KEY}"})[0] == want
    assert http.call(server.url + "/v2/models/a", headers={"Authorization": f"Bearer {KEY.upper()}"})[0] == 401


def exchange_in_two(server, head, body, pause=0.3, seconds=2.0):
    """The server's bytes for `head`, then `body` sent `pause` s later on the same connection,
    and whether the server closed the connection (EOF) within `seconds`."""
    host, port = server.url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=seconds) as s:
        s.sendall(head)
        time.sleep(pause)
        try:
            s.sendall(body)
        except OSError:  # closed already: nothing was read as a request
            pass
        out, closed, end = b"", False, time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            out += chunk
    return out.decode(errors="replace"), closed


def test_an_answer_that_says_close_closes_even_when_the_body_comes_later(server):
    """A body sent after the 401 (or the 400 for its framing) was read as the next request and
    answered 200 on a connection kept open: httplib 0.11 only sent the answer's "Connection:
    close" (a tester's raw-socket client, the body in a second segment)."""
    for head in (b"POST /v2/models/a/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(INNER),
                 b"POST /v2/models/a/infer HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: abc\r\n\r\n"):
        got, closed = exchange_in_two(server, head, INNER)
        assert statuses(got) in ([401], [400]) and closed, (got, closed)
        assert "Keep-Alive" not in got, got


def test_a_client_still_sending_its_body_reads_its_401(server):
    """Closing at once with the body unread made the kernel reset the connection: Python's
    http.client posting 4 MB without an API key got BrokenPipeError, not its 401. The server
    now shuts its side, reads and drops the rest, then closes (a lingering close)."""
    import http.client
    host, port = server.url.split("//")[1].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request("POST", "/v2/models/a/infer", body=b"x" * (4 << 20), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 401 and b"API key" in r.read()
    c.close()


def test_expect_100_continue_is_refused_before_the_body(server):
    """httplib answered 100 to every request: curl (Expect above 1 MB) sent a body over the limit
    or without a key whole before its 413 or 401."""
    def expect(headers):
        got, closed = exchange_in_two(server, b"POST /v2/models/a/infer HTTP/1.1\r\nHost: x\r\n" + headers
                                      + b"Expect: 100-continue\r\n\r\n", b"", pause=0.1, seconds=1.0)
        return got, closed
    got, closed = expect(AUTH + b"Content-Length: 999999999999\r\n")
    assert statuses(got) == [413] and "larger than --max-body-mb" in got and closed, got
    got, closed = expect(b"Content-Length: 10\r\n")
    assert statuses(got) == [401] and closed, got
    body = json.dumps(http.pixels(np.zeros((1, 3, 32, 32), np.float32))).encode()
    head = (b"POST /v2/models/a/infer HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: %d\r\n" % len(body)
            + b"Expect: 100-continue\r\n\r\n")
    got, _ = exchange_in_two(server, head, body, pause=0.2, seconds=2.0)
    assert statuses(got) == [100, 200], got


def test_what_httplib_refuses_while_reading_says_why(server):
    """Each was a bare "HTTP 400" on a connection kept open."""
    infer = b"POST /v2/models/a/infer HTTP/1.1\r\nHost: x\r\n" + AUTH
    got = exchange(server, infer + b"Content-Encoding: zstd\r\nContent-Length: 3\r\n\r\nabc")
    assert statuses(got) == [415] and "reads gzip, deflate and br" in got and "Connection: close" in got, got
    got = exchange(server, infer + b"Content-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc")
    assert statuses(got) == [400] and "could not be decompressed (gzip)" in got, got
    got = exchange(server, infer + b"X-Long: " + b"a" * 9000 + b"\r\n\r\n")
    assert statuses(got) == [400] and "header line is at most 8 KB" in got, got


def test_a_post_without_content_length_has_an_empty_body_at_once(server):
    """It waited for httplib's 5 s read timeout, then answered 400 "HTTP 400"
    (curl -X POST URL/v2/repository/index, as docs/serving.md shows it)."""
    start = time.monotonic()
    got = exchange(server, b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Connection: close\r\n\r\n",
                   seconds=3)
    assert statuses(got) == [200] and '"name":"a"' in got, got
    assert time.monotonic() - start < 2.5


def test_a_request_without_a_body_to_no_endpoint_is_answered_at_once(server):
    """curl -X POST (or PUT, PATCH) to a wrong path or method, without -d: httplib read a body
    until its 5 s timeout, then it got 400 "the body ended before its Content-Length" (found by
    a tester with Triton's and TorchServe's clients). Nothing to read: 404 or 405 at once."""
    for request, want, words in [(b"POST /v2/models/a/ready", 405, "Allow: GET"),
                                 (b"POST /v2/foo", 404, "no endpoint POST /v2/foo"),
                                 (b"PUT /v2/health/live", 405, "Allow: GET"),
                                 (b"PATCH /v2/models/a/infer", 405, "Allow: POST"),
                                 # Methods no endpoint has: the same 400, or the same wait (PRI).
                                 (b"TRACE /v2/models/a", 405, "Allow: GET"),
                                 (b"CONNECT /v2/foo", 404, "no endpoint CONNECT /v2/foo"),
                                 (b"PRI /v2/models/a/infer", 405, "Allow: POST")]:
        got = exchange(server, request + b" HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Connection: close\r\n\r\n",
                       seconds=3)  # under httplib's 5 s
        assert statuses(got) == [want] and words in got, got
    # Unauthenticated: still 401 first.
    got = exchange(server, b"POST /v2/foo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", seconds=3)
    assert statuses(got) == [401], got


def test_an_unknown_method_is_501_and_kserve_v1_liveness_is_open(server):
    """FOO was 400 "the request line or a header could not be read" (RFC 9110 section 9.1: 501).
    KServe's SDK with protocol v1 asks GET / for liveness; it was 404."""
    got = exchange(server, b"FOO /v2 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert statuses(got) == [501] and "the method FOO is not one vit serve answers" in got, got
    status, _, body = http.call(server.url + "/")  # without the API key, as the health endpoints
    assert (status, json.loads(body)) == (200, {"status": "alive"})


def test_every_answer_has_a_date_and_http11_needs_a_host(server):
    """RFC 9110 section 6.6.1: an origin server with a clock sends Date (there was none).
    RFC 9112 section 3.2: an HTTP/1.1 request without Host is 400 (it was answered)."""
    import email.utils
    for request in (b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                    b"GET /v2/nothing HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Connection: close\r\n\r\n",
                    b"GET /v2/health/ready HTTP/1.0\r\n\r\n"):  # HTTP/1.0 needs no Host
        got = exchange(server, request)
        date = re.search(r"^Date: (.+)\r$", got, re.M)
        assert date and statuses(got) in ([200], [404]), got
        when = email.utils.parsedate_to_datetime(date.group(1))
        assert date.group(1).endswith(" GMT") and abs(when.timestamp() - time.time()) < 60, date.group(1)
    got = exchange(server, b"GET /v2/health/ready HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert statuses(got) == [400] and "needs a Host header" in got, got
    got = exchange(server, b"POST /v2/models/a/infer HTTP/1.1\r\n" + AUTH + b"Content-Length: 2\r\n\r\n{}")
    assert statuses(got) == [400] and "needs a Host header" in got and "Connection: close" in got, got
    # The same sentence of the RFC: two Host headers, or one that is no host, are 400 too.
    for host, want, words in [(b"Host: x\r\nHost: y", 400, "has 2 Host headers"),
                              (b"Host: a b", 400, "is not a host and port"),
                              (b"Host: user@x", 400, "is not a host and port"),
                              (b"Host:", 400, "needs a Host header with a value"),
                              (b"Host: localhost:8080", 200, ""), (b"Host: [::1]:80", 200, ""),
                              (b"Host: 127.0.0.1", 200, ""), (b"host: x", 200, "")]:
        got = exchange(server, b"GET /v2/health/ready HTTP/1.1\r\n" + host + b"\r\nConnection: close\r\n\r\n")
        assert statuses(got) == [want] and words in got, (host, got)


def test_a_known_path_with_another_method_is_405_with_allow(server):
    h = {"Authorization": f"Bearer {KEY}"}
    status, headers, body = http.call(server.url + "/v2/models/a/infer", headers=h)  # GET
    assert (status, headers["Allow"]) == (405, "POST"), body
    assert "GET is not an endpoint's method" in json.loads(body)["error"]
    status, headers, _ = http.call(server.url + "/v2/models/a", headers=h, method="DELETE")
    assert (status, headers["Allow"]) == (405, "GET")
    assert http.call(server.url + "/v2/nothing", headers=h)[0] == 404


def test_metrics_escape_model_names_as_prometheus_reads_them(server):
    text = http.call(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"})[2]
    assert 'vit_queue_depth{model="q\\"x\\\\y"} 0' in text, text
    # Every sample line: name{label="value",...} number, values quoted with escapes only.
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r'[a-zA-Z_:][\w:]*(\{([a-zA-Z_]\w*="([^"\\\n]|\\[\\"n])*",?)*\})? \S+', line), line


def test_a_request_over_max_batch_size_is_400_as_triton(server):
    x = np.zeros((5, 3, 32, 32), np.float32)
    status, _, body = http.call(server.url + "/v2/models/a/infer", http.pixels(x),
                                {"Authorization": f"Bearer {KEY}"})
    assert status == 400 and "5 images, more than the model's max_batch_size of 4" in body, body
    assert http.call(server.url + "/v2/models/a/infer", http.pixels(x[:4]), {"Authorization": f"Bearer {KEY}"})[0] == 200


def test_torchserve_multipart_takes_the_data_field_among_others(server):
    """A second part made the whole read fail with 400 "HTTP 400"."""
    image = open(http.IMAGES[0], "rb").read()
    want = http.call(server.url + "/predictions/a", image, {"Authorization": f"Bearer {KEY}"})[2]
    for fields in ([("data", image), ("foo", b"bar")], [("foo", b"bar"), ("data", image)]):
        boundary = "vitcpp-boundary"
        body = b"".join(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"f\"\r\n\r\n%s\r\n"
                        % (boundary.encode(), name.encode(), value) for name, value in fields)
        body += b"--%s--\r\n" % boundary.encode()
        status, _, got = http.call(server.url + "/predictions/a", body,
                                   {"Authorization": f"Bearer {KEY}",
                                    "Content-Type": f"multipart/form-data; boundary={boundary}"})
        assert (status, got) == (200, want), got
    # Several images in one form: one was answered, the others dropped without a word.
    for fields, words in (([("data", image), ("data", image)], "a form of 2 images"),
                          ([("img1", image), ("img2", image)], "a form of 2 images")):
        body = b"".join(b"--b\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"f\"\r\n\r\n%s\r\n"
                        % (name.encode(), value) for name, value in fields) + b"--b--\r\n"
        status, _, got = http.call(server.url + "/predictions/a", body,
                                   {"Authorization": f"Bearer {KEY}", "Content-Type": "multipart/form-data; boundary=b"})
        assert status == 400 and words in got and "one per request" in got, got
    # TorchServe reads "data" before "body": a form with both is one image.
    body = b"".join(b"--b\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"f\"\r\n\r\n%s\r\n"
                    % (name.encode(), value) for name, value in (("body", b"text"), ("data", image))) + b"--b--\r\n"
    assert http.call(server.url + "/predictions/a", body, {"Authorization": f"Bearer {KEY}",
                                                           "Content-Type": "multipart/form-data; boundary=b"})[2] == want
    # TorchServe's versioned path: /predictions/{m}/{version}, its packager's "1.0" as "1".
    h = {"Authorization": f"Bearer {KEY}"}
    assert http.call(server.url + "/predictions/a/1", image, h)[2] == want
    assert http.call(server.url + "/predictions/a/1.0", image, h)[2] == want
    status, _, got = http.call(server.url + "/predictions/a/2", image, h, method="PUT")
    assert status == 404 and "has version 1 only, not '2'" in got, got


@pytest.mark.parametrize("flag,value,message", [("--timeout-s", "1e10", "at most 1e6 s"),
                                                ("--max-body-mb", "1e14", "at most 1e6"),
                                                ("--max-delay-ms", "1e300", "at most 1e6")])
def test_flag_values_past_the_clocks_and_counters_are_refused(flag, value, message):
    r = subprocess.run([http.vit_binary(), "serve", "--model", f"a={http.CK}", "--port", "0", flag, value],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and message in r.stderr + r.stdout, r.stderr + r.stdout
