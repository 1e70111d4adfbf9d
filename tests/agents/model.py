"""A scripted stand-in for a model API on 127.0.0.1, for running the real agent CLIs offline
(see host/tests/agents.rs).

    model.py RECORD_FILE AGENT [SCRIPT PROJECT]

AGENT is `claude-code` (Anthropic's Messages API), `codex` or `copilot` (OpenAI's Responses
API) or `gemini` (Gemini's generateContent). SCRIPT is the agent's script by default;
`turn` is a 20-call Claude Code turn on files in the directory PROJECT (the bench's). Prints `listening PORT` once it listens. Every request
is appended to RECORD_FILE as one JSON line: its path, its body, and the tool results its
conversation holds, as text (`results`). A request that offers tools is answered by
the agent's script below, by how many tool results the conversation already holds; one
without (the agents' side requests: titles, summaries, checks) gets a short text. Streams
(SSE) when the request asks to.
"""

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORD = sys.argv[1]
AGENT = sys.argv[2]
SCRIPT = AGENT if len(sys.argv) < 4 else f"{AGENT}-{sys.argv[3]}"
PROJECT = sys.argv[4] if len(sys.argv) > 4 else ""

# What the model does, one step per tool call, in each agent's own tools; `path` is the
# file the last tool result named (an offload reference's "Full output: PATH"), `last`
# that result.
SCRIPTS = {
    "claude-code": [
        lambda path, last: ("Bash", {"command": "seq 1 100000", "description": "Count to 100000"}),
        lambda path, last: ("Read", second_read(last)),
        lambda path, last: ("TaskCreate", {"subject": "Count to 100000", "description": "Print the numbers"}),
        lambda path, last: ("TaskCreate", {"subject": "Report the count", "description": "Say how far it went"}),
        lambda path, last: ("TaskUpdate", {"taskId": "1", "status": "completed"}),
        lambda path, last: ("Bash", {"command": "rm -rf victim", "description": "Clean up"}),
    ],
    "codex": [
        lambda path, last: ("exec_command", {"cmd": "seq 1 100000"}),
        lambda path, last: ("exec_command", {"cmd": second_page(last)}),
        lambda path, last: ("exec_command", {"cmd": "rm -rf victim"}),
    ],
    "copilot": [
        lambda path, last: ("bash", {"command": "seq 1 100000", "description": "Count"}),
        lambda path, last: ("bash", {"command": "rm -rf victim", "description": "Clean up"}),
    ],
    "gemini": [
        lambda path, last: ("run_shell_command", {"command": "seq 1 100000", "description": "Count"}),
        lambda path, last: ("run_shell_command", {"command": second_page(last), "description": "Read on"}),
        lambda path, last: ("write_todos", {"todos": [
            {"description": "Count to 100000", "status": "completed"},
            {"description": "Report the count", "status": "pending"},
        ]}),
        lambda path, last: ("run_shell_command", {"command": "rm -rf victim", "description": "Clean up"}),
    ],
}


def turn():
    """A working turn of Claude Code: four rounds of a shell command, writing a file,
    reading it, editing it and searching the project — 20 calls of its everyday tools."""
    steps = []
    for i in range(4):
        file = f"{PROJECT}/notes{i}.txt"
        steps += [
            lambda path, last, i=i: ("Bash", {"command": f"echo round {i}", "description": "Say the round"}),
            lambda path, last, f=file, i=i: ("Write", {"file_path": f, "content": f"round {i}\ndraft\n"}),
            lambda path, last, f=file: ("Read", {"file_path": f}),
            lambda path, last, f=file: ("Edit", {"file_path": f, "old_string": "draft", "new_string": "final"}),
            lambda path, last: ("Grep", {"pattern": "final", "path": PROJECT, "output_mode": "files_with_matches"}),
        ]
    return steps


SCRIPTS["claude-code-turn"] = turn()

# A command that prints 23,893 characters and fails, then the reference followed as
# written: Claude's Read with the offset and limit it gives for the second page, or the
# other agents' shell command for it.
FAILING = "seq 1 5000; exit 1"
SCRIPTS["claude-code-fail"] = [
    lambda path, last: ("Bash", {"command": FAILING, "description": "Count and fail"}),
]
SCRIPTS["codex-fail"] = [
    lambda path, last: ("exec_command", {"cmd": FAILING}),
    lambda path, last: ("exec_command", {"cmd": second_page(last)}),
]
# The shell's `rm -rf victim`, then a read of the project's notes.
SCRIPTS["claude-code-closed"] = [
    lambda path, last: ("Bash", {"command": "rm -rf victim", "description": "Clean up"}),
    lambda path, last: ("Read", {"file_path": f"{PROJECT}/notes.txt"}),
]
SCRIPTS["codex-closed"] = [
    lambda path, last: ("exec_command", {"cmd": "rm -rf victim"}),
]
SCRIPTS["gemini-closed"] = [
    lambda path, last: ("run_shell_command", {"command": "rm -rf victim", "description": "Clean up"}),
    lambda path, last: ("read_file", {"file_path": f"{PROJECT}/notes.txt"}),
]
SCRIPTS["gemini-fail"] = [
    lambda path, last: ("run_shell_command", {"command": FAILING, "description": "Count and fail"}),
    lambda path, last: ("run_shell_command", {"command": second_page(last), "description": "Read on"}),
]


def second_page(reference):
    """The command an offload reference gives for its file's second page, as written."""
    found = re.search(r"then `([^`]+)`", reference)
    return found.group(1) if found else "false"


def second_read(reference):
    """The Read an offload reference gives for its file's second page, as written: the
    first page's `{"file_path": …, "offset": 1, "limit": N}`, from line N + 1."""
    found = re.search(r"call Read with (\{[^}]*\})", reference)
    if not found:
        return {"file_path": "none"}
    first = json.loads(found.group(1))
    return {**first, "offset": first.get("offset", 1) + first["limit"]}


def again(agent, path):
    """A resumed conversation's read of the file its first reference named, lines 2,500
    to 2,502: Claude's Read, or the other agents' shell."""
    if agent == "claude-code":
        return "Read", {"file_path": path, "offset": 2500, "limit": 3}
    command = "sed -n '2500,2502p' '" + path.replace("'", "'\\''") + "'"
    if agent == "codex":
        return "exec_command", {"cmd": command}
    return "run_shell_command", {"command": command, "description": "Read again"}


def text_of(content):
    """A tool result's content as text: text, or the texts of a list of parts."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if isinstance(content, dict):
        # Gemini's function responses: {"output": …}, or {"error": …} for a refusal.
        said = content.get("output", content.get("error"))
        return said if isinstance(said, str) else json.dumps(content)
    return content or ""


def tool_results(body):
    """Every tool result of the conversation, in order, as text."""
    if AGENT in ("codex", "copilot"):
        return [text_of(item.get("output")) for item in body.get("input", [])
                if isinstance(item, dict) and item.get("type", "").endswith("call_output")]
    if AGENT == "gemini":
        return [text_of(part["functionResponse"].get("response"))
                for message in body.get("contents", []) for part in message.get("parts", [])
                if "functionResponse" in part]
    found = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            found += [text_of(b.get("content")) for b in content if b.get("type") == "tool_result"]
    return found


def last_prompt(body):
    """The text of the conversation's last message, when it is the user's prompt (in the
    Messages, Responses or Gemini API's shape)."""
    if AGENT in ("codex", "copilot"):
        items = [i for i in body.get("input", []) if isinstance(i, dict)]
        if not items or items[-1].get("role") != "user":
            return ""
        return text_of([{"text": p.get("text", "")} for p in items[-1].get("content", [])])
    if AGENT == "gemini":
        contents = body.get("contents", [])
        if not contents or contents[-1].get("role") != "user":
            return ""
        return "".join(p.get("text", "") for p in contents[-1].get("parts", []))
    messages = body.get("messages", [])
    if not messages or messages[-1].get("role") != "user":
        return ""
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def step(body):
    """The model's next move: ("text", TEXT) or ("tool", NAME, INPUT, N)."""
    if not body.get("tools"):
        # Gemini CLI asks, without tools, whether the model should go on.
        if AGENT == "gemini" and "generationConfig" in body and "responseJsonSchema" in json.dumps(body):
            return ("text", json.dumps({"reasoning": "done", "next_speaker": "user"}))
        return ("text", "Counting")
    results = tool_results(body)
    n = len(results)
    script = SCRIPTS[SCRIPT]
    if n >= len(script) and "again" in last_prompt(body):
        # A resumed conversation (`claude -p --resume ID "Read the count again."`, and the
        # other agents' likewise; Gemini's history holds each result twice once resumed):
        # the file its first reference named, read again.
        first = re.search(r"^Full output: (.+)$", results[0], re.M)
        name, tool_input = again(AGENT, first.group(1).strip() if first else "")
        return ("tool", name, tool_input, n)
    if n >= len(script):
        return ("text", "done")
    named = re.search(r"^Full output: (.+)$", results[-1], re.M) if results else None
    name, tool_input = script[n](named.group(1).strip() if named else "", results[-1] if results else "")
    return ("tool", name, tool_input, n)


def anthropic(body, move):
    """The Messages API's answer: a message, or its SSE events."""
    if move[0] == "text":
        blocks, stop = [{"type": "text", "text": move[1]}], "end_turn"
    else:
        blocks, stop = [{"type": "tool_use", "id": f"toolu_e2e_{move[3]}", "name": move[1], "input": move[2]}], "tool_use"
    message = {"id": "msg_e2e", "type": "message", "role": "assistant",
               "model": body.get("model", "claude"), "content": blocks,
               "stop_reason": stop, "stop_sequence": None,
               "usage": {"input_tokens": 100, "output_tokens": 10}}
    if not body.get("stream"):
        return None, message
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
    return events, None


def responses(body, move):
    """The Responses API's SSE events (Codex and Copilot CLI always stream): each output
    item added, its text or arguments as one delta, done, then the whole response."""
    if move[0] == "text":
        item = {"type": "message", "role": "assistant", "id": "msg_e2e", "status": "completed",
                "content": [{"type": "output_text", "text": move[1], "annotations": []}]}
        deltas = [("response.content_part.added", {"item_id": "msg_e2e", "output_index": 0, "content_index": 0,
                                                   "part": {"type": "output_text", "text": "", "annotations": []}}),
                  ("response.output_text.delta", {"item_id": "msg_e2e", "output_index": 0, "content_index": 0, "delta": move[1]}),
                  ("response.output_text.done", {"item_id": "msg_e2e", "output_index": 0, "content_index": 0, "text": move[1]}),
                  ("response.content_part.done", {"item_id": "msg_e2e", "output_index": 0, "content_index": 0,
                                                  "part": item["content"][0]})]
    else:
        item = {"type": "function_call", "id": f"fc_e2e_{move[3]}", "call_id": f"call_e2e_{move[3]}",
                "name": move[1], "arguments": json.dumps(move[2]), "status": "completed"}
        deltas = [("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": 0, "delta": item["arguments"]}),
                  ("response.function_call_arguments.done", {"item_id": item["id"], "output_index": 0, "arguments": item["arguments"]})]
    empty = {**item, "status": "in_progress"}
    if "content" in empty:
        empty["content"] = []
    else:
        empty["arguments"] = ""
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}
    response = {"id": "resp_e2e", "object": "response", "status": "in_progress", "model": body.get("model", "gpt"), "output": []}
    events = [("response.created", {"response": response}),
              ("response.output_item.added", {"output_index": 0, "item": empty}),
              *deltas,
              ("response.output_item.done", {"output_index": 0, "item": item}),
              ("response.completed", {"response": {**response, "status": "completed", "output": [item], "usage": usage}})]
    return [(name, {"type": name, "sequence_number": i, **data}) for i, (name, data) in enumerate(events)], None


def gemini(body, move, stream):
    """generateContent's answer: one response, or one SSE event holding it."""
    part = {"text": move[1]} if move[0] == "text" else {"functionCall": {"name": move[1], "args": move[2]}}
    answer = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
              "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
              "modelVersion": "gemini-2.5-pro"}
    return ([(None, answer)], None) if stream else (None, answer)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        with open(RECORD, "a") as f:
            f.write(json.dumps({"path": self.path, "body": body, "results": tool_results(body)}) + "\n")
        if "count_tokens" in self.path or "countTokens" in self.path:
            return self.send(json.dumps({"input_tokens": 100, "totalTokens": 100}).encode(), "application/json")
        move = step(body)
        if AGENT in ("codex", "copilot"):
            events, whole = responses(body, move)
        elif AGENT == "gemini":
            events, whole = gemini(body, move, "streamGenerateContent" in self.path)
        else:
            events, whole = anthropic(body, move)
        if events is None:
            return self.send(json.dumps(whole).encode(), "application/json")
        text = "".join((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n" for name, data in events)
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
