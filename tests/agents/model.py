"""A scripted stand-in for the Anthropic Messages API on 127.0.0.1, for running the real
Claude Code CLI offline (see host/tests/agents.rs).

    model.py RECORD_FILE

Prints `listening PORT` once it listens. Every request body is appended to RECORD_FILE as
one JSON line. A request with tools is answered by the script below, by how many tool
calls the conversation already holds; one without (Claude Code's side requests: titles,
summaries) gets a short text. Streams (SSE) when the request asks to.
"""

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORD = sys.argv[1]

# What the model does, one step per tool call; `path` is the file the last tool result
# named (an offload reference's "Full output: PATH").
SCRIPT = [
    lambda path: ("Bash", {"command": "seq 1 100000", "description": "Count to 100000"}),
    lambda path: ("Read", {"file_path": path, "offset": 99990, "limit": 20}),
    lambda path: ("TaskCreate", {"subject": "Count to 100000", "description": "Print the numbers"}),
    lambda path: ("TaskCreate", {"subject": "Report the count", "description": "Say how far it went"}),
    lambda path: ("TaskUpdate", {"taskId": "1", "status": "completed"}),
    lambda path: ("Bash", {"command": "rm -rf victim", "description": "Clean up"}),
]


def tool_results(messages):
    """Every tool_result block of the conversation, in order, as text."""
    found = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "".join(b.get("text", "") for b in inner if isinstance(b, dict))
                found.append(inner or "")
    return found


def respond(body):
    """The assistant's content blocks and stop reason for a request."""
    if not body.get("tools"):
        return [{"type": "text", "text": "Counting"}], "end_turn"
    results = tool_results(body.get("messages", []))
    step = len(results)
    if step >= len(SCRIPT):
        return [{"type": "text", "text": "done"}], "end_turn"
    last = results[-1] if results else ""
    named = re.search(r"^Full output: (.+)$", last, re.M)
    name, tool_input = SCRIPT[step](named.group(1).strip() if named else "")
    return [{"type": "tool_use", "id": f"toolu_e2e_{step}", "name": name, "input": tool_input}], "tool_use"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        with open(RECORD, "a") as f:
            f.write(json.dumps({"path": self.path, "body": body}) + "\n")
        if "count_tokens" in self.path:
            return self.send(json.dumps({"input_tokens": 100}).encode(), "application/json")
        blocks, stop = respond(body)
        message = {"id": "msg_e2e", "type": "message", "role": "assistant",
                   "model": body.get("model", "claude"), "content": blocks,
                   "stop_reason": stop, "stop_sequence": None,
                   "usage": {"input_tokens": 100, "output_tokens": 10}}
        if not body.get("stream"):
            return self.send(json.dumps(message).encode(), "application/json")
        events = [("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}})]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                events += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
                           ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": block["text"]}})]
            else:
                events += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}}),
                           ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}})]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}),
                   ("message_stop", {"type": "message_stop"})]
        text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
        self.send(text.encode(), "text/event-stream")

    def send(self, data, kind):
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send(b"{}", "application/json")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
