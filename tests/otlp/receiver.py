"""An OTLP/HTTP trace receiver for the tests: it decodes each export with the OpenTelemetry
protobuf definitions (PyPI `opentelemetry-proto`) and prints one JSON line per span.

    receiver.py        prints `listening PORT` first (a free port on 127.0.0.1)

Each span line: trace_id, span_id, parent_span_id (hex; "" for a root), name, service,
attributes (strings, numbers, booleans).
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(pairs):
    return {pair.key: value(pair.value) for pair in pairs}


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
            self.send_error(404 if self.path != "/v1/traces" else 415)
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers["content-length"])))
        for resource_spans in request.resource_spans:
            service = attributes(resource_spans.resource.attributes).get("service.name")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    print(json.dumps({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "service": service,
                        "attributes": attributes(span.attributes),
                    }), flush=True)
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    print("listening", server.server_address[1], flush=True)
    server.serve_forever()
