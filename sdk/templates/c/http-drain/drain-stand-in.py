#!/usr/bin/env python3
"""A stand-in for the service {{name}} drains (its drain-url), to try the plugin without that
service: listens on 127.0.0.1:PORT (default 8080), answers every POST with 204 and prints the
request. `python3 drain-stand-in.py [PORT]`; stop it with Ctrl-C."""

import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Drain(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        print(f"POST {self.path} {body}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format, *args):
        pass  # do_POST prints each request


port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
print(f"drain stand-in on http://127.0.0.1:{port}/ (answers every POST with 204)", flush=True)
HTTPServer(("127.0.0.1", port), Drain).serve_forever()
