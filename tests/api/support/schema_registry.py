"""A stand-in for a Confluent schema registry, for the tests: in memory, the calls of its
REST API that the service and Confluent's own serializers and deserializers make. No
schema registry package reaches the development machine (docs/decisions.md), and the
registry is not part of the product: what the tests check is that Confluent's client
library reads and writes the service's values through it.

Prints the port it listens on, then serves until killed.
"""

import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

schemas = []  # schema text, by id - 1
subjects = {}  # subject -> [id of each version]
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def canonical(text):
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


class Registry(BaseHTTPRequestHandler):
    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def not_found(self, code, message):
        self.reply(404, {"error_code": code, "message": message})

    def do_POST(self):
        m = re.fullmatch(r"/subjects/([^/?]+)/versions(\?.*)?", self.path)
        if not m:
            return self.not_found(404, "no such call")
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("schemaType", "AVRO") != "AVRO":
            return self.reply(422, {"error_code": 42201, "message": "only Avro here"})
        try:
            key = canonical(body["schema"])
        except (KeyError, ValueError):
            return self.reply(422, {"error_code": 42201, "message": "invalid schema"})
        ids = [i for i, s in enumerate(schemas, 1) if canonical(s) == key]
        if ids:
            id = ids[0]
        else:
            schemas.append(body["schema"])
            id = len(schemas)
        versions = subjects.setdefault(m.group(1), [])
        if id not in versions:
            versions.append(id)
        self.reply(200, {"id": id})

    def do_GET(self):
        path = self.path.split("?")[0]
        if m := re.fullmatch(r"/schemas/ids/(\d+)", path):
            id = int(m.group(1))
            if not 1 <= id <= len(schemas):
                return self.not_found(40403, "Schema not found")
            return self.reply(200, {"schema": schemas[id - 1]})
        if path == "/subjects":
            return self.reply(200, sorted(subjects))
        if m := re.fullmatch(r"/subjects/([^/]+)/versions", path):
            if m.group(1) not in subjects:
                return self.not_found(40401, "Subject not found")
            return self.reply(200, list(range(1, len(subjects[m.group(1)]) + 1)))
        self.not_found(404, "no such call")

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
print(server.server_address[1], flush=True)
server.serve_forever()
