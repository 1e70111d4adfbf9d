"""An MCP server that serves every feature a gateway must pass through, as the official
conformance suite (npm `@modelcontextprotocol/conformance`) expects of the server it tests:
its tools (`test_simple_text`, `test_tool_with_progress`, `test_sampling`,
`test_elicitation`…), resources (`test://static-text`, the template
`test://template/{id}/data`, the subscribable `test://watched-resource`), prompts,
completions and logging; and the diagnostic tools of its MCP 2026-07-28 `server-stateless`
scenario (`test_streaming_elicitation`, `test_logging_tool`, `test_missing_capability`,
`test_trigger_tool_change`, `test_trigger_prompt_change`), which ask the client, log, need
sampling and change the lists as a 2025-era server does, so that the suite
sees what hookhost makes of that for a 2026 client. Written with the official Python SDK's
low-level server, so every answer is the one the suite checks. hookhost fronts it in tests/mcp/gateway.py and in the
conformance runs of .ci/conformance.

    everything.py                 on stdio
    everything.py --http PORT     Streamable HTTP at http://127.0.0.1:PORT/mcp

Beside what the suite asks, for the gateway tests: `big_resource` (a 2 MB text resource,
`test://big`), the tool `touch_watched` (sends `notifications/resources/updated` for
`test://watched-resource` to the sessions subscribed to it), `progress_burst` (progress 1 to
5 sent back to back, then the answer), `ask_twice` (two elicitations in one call), `whoami` (the server's process
id, so a test tells one instance from another), `remember`/`recall` (a memory, per process:
what a stateful upstream would keep) and `roots` (what the client answers to `roots/list`).
"""

import asyncio
import json
import os
import sys

import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.shared.exceptions import MCPError

IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
BIG = "0123456789abcdef" * (2 * 1024 * 1024 // 16)
EMPTY = {"type": "object", "properties": {}}

subscribers = {}  # uri -> {connection: a session of it} subscribed to it
memory = []


def tool(name, description, schema=None):
    return types.Tool(name=name, description=description, input_schema=schema or EMPTY)


TOOLS = [
    tool("test_simple_text", "Tests simple text content response"),
    tool("test_image_content", "Tests image content response"),
    tool("test_audio_content", "Tests audio content response"),
    tool("test_embedded_resource", "Tests embedded resource content response"),
    tool("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)"),
    tool("test_tool_with_logging", "Tests tool that emits log messages during execution"),
    tool("test_tool_with_progress", "Tests tool that reports progress notifications"),
    tool("test_error_handling", "Tests error response handling"),
    tool("test_reconnection", "Tests SSE stream disconnection and client reconnection (SEP-1699)"),
    tool(
        "test_sampling",
        "Tests server-initiated sampling (LLM completion request)",
        {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    ),
    tool(
        "test_elicitation",
        "Tests server-initiated elicitation (user input request)",
        {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    ),
    tool("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034"),
    tool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330"),
    tool(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
    tool("test_streaming_elicitation", "Asks the client for a response (an elicitation), MCP 2025's way"),
    tool("test_logging_tool", "Sends log messages while it runs"),
    tool("test_missing_capability", "Needs sampling: asks the client for a completion"),
    tool("test_trigger_tool_change", "Adds or removes the tool test_dynamic_tool, and says the tools changed"),
    tool("test_trigger_prompt_change", "Adds or removes the prompt test_dynamic_prompt, and says the prompts changed"),
    tool(
        "ask_twice",
        "Asks the client twice in one call (elicitations `first:MESSAGE`, then `second:MESSAGE`)",
        {"type": "object", "properties": {"message": {"type": "string"}}},
    ),
    tool("touch_watched", "Tells the subscribers of test://watched-resource that it changed"),
    tool("whoami", "The server's process id"),
    tool("progress_burst", "Reports progress 1 to 5 at once, then answers"),
    tool("wait", "Answers after `secs` seconds", {"type": "object", "properties": {"secs": {"type": "number"}}}),
    tool(
        "remember",
        "Keeps a fact in this server's memory",
        {"type": "object", "properties": {"fact": {"type": "string"}}, "required": ["fact"]},
    ),
    tool("recall", "The facts this server remembers"),
    tool("roots", "The roots the client lists"),
]

SEP1034 = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}

SEP1330 = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
    "required": [],
}


def text(value):
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


def embedded(uri, mime, value):
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime, text=value)
    )


async def elicit(ctx, message, schema, label):
    try:
        answer = await ctx.session.send_request(
            types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema)),
            types.ElicitResult,
        )
    except MCPError as e:
        return text(f"Elicitation not supported or error: {e}")
    content = json.dumps(answer.content or {}, separators=(",", ":"))
    return text(f"{label}: action={answer.action}, content={content}")


async def call_tool(ctx, params):
    name, args = params.name, params.arguments or {}
    session, request = ctx.session, ctx.request_id
    if name == "test_simple_text":
        return text("This is a simple text response for testing.")
    if name == "test_image_content":
        return types.CallToolResult(content=[types.ImageContent(type="image", data=IMAGE, mime_type="image/png")])
    if name == "test_audio_content":
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=AUDIO, mime_type="audio/wav")])
    if name == "test_embedded_resource":
        block = embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")
        return types.CallToolResult(content=[block])
    if name == "test_multiple_content_types":
        data = json.dumps({"test": "data", "value": 123}, separators=(",", ":"))
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="Multiple content types test:"),
                types.ImageContent(type="image", data=IMAGE, mime_type="image/png"),
                embedded("test://mixed-content-resource", "application/json", data),
            ]
        )
    if name in ("test_tool_with_logging", "test_logging_tool"):
        for line in ["Tool execution started", "Tool processing data", "Tool execution completed"]:
            await session.send_log_message("info", line, related_request_id=request)
            await asyncio.sleep(0.05)
        return text("Tool with logging executed successfully")
    if name == "test_tool_with_progress":
        token = (ctx.meta or {}).get("progressToken", 0)
        for step in (0, 50, 100):
            await session.report_progress(step, 100, f"Completed step {step} of 100")
            if step < 100:
                await asyncio.sleep(0.05)
        return text(str(token))
    if name == "test_error_handling":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="This tool intentionally returns an error for testing")],
            is_error=True,
        )
    if name == "test_reconnection":
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await asyncio.sleep(0.1)
        return text(
            "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."
        )
    if name == "test_sampling":
        try:
            answer = await session.send_request(
                types.CreateMessageRequest(
                    params=types.CreateMessageRequestParams(
                        messages=[
                            types.SamplingMessage(
                                role="user", content=types.TextContent(type="text", text=args.get("prompt", ""))
                            )
                        ],
                        max_tokens=100,
                    )
                ),
                types.CreateMessageResult,
            )
        except MCPError as e:
            return text(f"Sampling not supported or error: {e}")
        reply = answer.content.text if isinstance(answer.content, types.TextContent) else "No response"
        return text(f"LLM response: {reply}")
    if name == "test_missing_capability":
        # Needs sampling: a 2026 client that did not declare it gets -32021 from hookhost.
        return await call_tool(ctx, types.CallToolRequestParams(name="test_sampling", arguments={"prompt": "Hi"}))
    if name in ("test_elicitation", "test_streaming_elicitation"):
        schema = {
            "type": "object",
            "properties": {"response": {"type": "string", "description": "User's response"}},
            "required": ["response"],
        }
        return await elicit(ctx, args.get("message", ""), schema, "User response")
    if name == "test_elicitation_sep1034_defaults":
        return await elicit(ctx, "Please review and update the form fields with defaults", SEP1034, "Elicitation completed")
    if name == "test_elicitation_sep1330_enums":
        return await elicit(ctx, "Please select options from the enum fields", SEP1330, "Elicitation completed")
    if name == "json_schema_2020_12_tool":
        return text(f"JSON Schema 2020-12 tool called with: {json.dumps(args, separators=(',', ':'))}")
    if name == "test_trigger_tool_change":
        dynamic = [t for t in TOOLS if t.name == "test_dynamic_tool"]
        if dynamic:
            TOOLS.remove(dynamic[0])
        else:
            TOOLS.append(tool("test_dynamic_tool", "Comes and goes with test_trigger_tool_change"))
        await session.send_tool_list_changed()
        return text("tools changed")
    if name == "test_trigger_prompt_change":
        dynamic = [p for p in PROMPTS if p.name == "test_dynamic_prompt"]
        if dynamic:
            PROMPTS.remove(dynamic[0])
        else:
            PROMPTS.append(types.Prompt(name="test_dynamic_prompt", description="Comes and goes"))
        await session.send_prompt_list_changed()
        return text("prompts changed")
    if name == "ask_twice":
        schema = {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"]}
        one = await elicit(ctx, "first:" + args.get("message", ""), schema, "first")
        two = await elicit(ctx, "second:" + args.get("message", ""), schema, "second")
        return text(one.content[0].text + " | " + two.content[0].text)
    if name == "touch_watched":
        uri = "test://watched-resource"
        for subscriber in list(subscribers.get(uri, {}).values()):
            await subscriber.send_resource_updated(uri)
        return text(f"told {len(subscribers.get(uri, ()))} subscribers")
    if name == "progress_burst":
        for step in range(1, 6):
            await session.report_progress(step, 5)
        return text("burst")
    if name == "wait":
        await asyncio.sleep(float(args.get("secs", 1)))
        return text("waited")
    if name == "whoami":
        return text(str(os.getpid()))
    if name == "remember":
        memory.append(args["fact"])
        return text("remembered")
    if name == "recall":
        return text(json.dumps(memory))
    if name == "roots":
        try:
            listed = await session.list_roots()
        except MCPError as e:
            return text(f"no roots: {e}")
        return text(json.dumps([str(root.uri) for root in listed.roots]))
    raise MCPError(code=-32602, message=f"Unknown tool: {name}")


RESOURCES = {
    "test://static-text": ("static-text", "Static Text Resource", "text/plain"),
    "test://static-binary": ("static-binary", "Static Binary Resource", "image/png"),
    "test://watched-resource": ("watched-resource", "Watched Resource", "text/plain"),
    "test://big": ("big_resource", "A 2 MB text", "text/plain"),
}


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def list_resources(ctx, params):
    return types.ListResourcesResult(
        resources=[
            types.Resource(uri=uri, name=name, title=title, mime_type=mime)
            for uri, (name, title, mime) in RESOURCES.items()
        ]
    )


async def list_templates(ctx, params):
    template = types.ResourceTemplate(
        uri_template="test://template/{id}/data",
        name="template",
        title="Resource Template",
        description="A resource template with parameter substitution",
        mime_type="application/json",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(ctx, params):
    uri = str(params.uri)
    if uri == "test://static-text":
        contents = types.TextResourceContents(
            uri=uri, mime_type="text/plain", text="This is the content of the static text resource."
        )
    elif uri == "test://static-binary":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=IMAGE)
    elif uri == "test://watched-resource":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content")
    elif uri == "test://big":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=BIG)
    elif uri.startswith("test://template/") and uri.endswith("/data"):
        id_ = uri[len("test://template/") : -len("/data")]
        data = {"id": id_, "templateTest": True, "data": f"Data for ID: {id_}"}
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(data))
    else:
        raise MCPError(code=-32002, message=f"Resource not found: {uri}", data={"uri": uri})
    return types.ReadResourceResult(contents=[contents])


def connection(session):
    """What one client's requests share: the SDK gives each request a session of its own."""
    return id(session._connection)


async def subscribe(ctx, params):
    subscribers.setdefault(str(params.uri), {})[connection(ctx.session)] = ctx.session
    return types.EmptyResult()


async def unsubscribe(ctx, params):
    subscribers.get(str(params.uri), {}).pop(connection(ctx.session), None)
    return types.EmptyResult()


PROMPTS = [
    types.Prompt(name="test_simple_prompt", title="Simple Test Prompt", description="A simple prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        title="Prompt With Arguments",
        description="A prompt with required arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        title="Prompt With Embedded Resource",
        description="A prompt that includes an embedded resource",
        arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource to embed", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", title="Prompt With Image", description="A prompt that includes image content"),
]


async def list_prompts(ctx, params):
    return types.ListPromptsResult(prompts=PROMPTS)


def said(content):
    return types.PromptMessage(role="user", content=content)


async def get_prompt(ctx, params):
    args = params.arguments or {}
    if params.name == "test_simple_prompt":
        messages = [said(types.TextContent(type="text", text="This is a simple prompt for testing."))]
    elif params.name == "test_prompt_with_arguments":
        line = f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"
        messages = [said(types.TextContent(type="text", text=line))]
    elif params.name == "test_prompt_with_embedded_resource":
        resource = embedded(args.get("resourceUri", ""), "text/plain", "Embedded resource content for testing.")
        messages = [said(resource), said(types.TextContent(type="text", text="Please process the embedded resource above."))]
    elif params.name == "test_prompt_with_image":
        messages = [
            said(types.ImageContent(type="image", data=IMAGE, mime_type="image/png")),
            said(types.TextContent(type="text", text="Please analyze the image above.")),
        ]
    else:
        raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")
    return types.GetPromptResult(messages=messages)


async def complete(ctx, params):
    """Completes `arg1` of test_prompt_with_arguments and `id` of the template from a
    fixed list; anything else has no suggestions (what the suite asks)."""
    choices = {"arg1": ["alpha", "alpine", "beta"], "id": ["1", "12", "123"]}.get(params.argument.name, [])
    values = [c for c in choices if c.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


async def set_level(ctx, params):
    await ctx.session.send_log_message("info", f"Log level set to: {params.level}", logger="everything")
    return types.EmptyResult()


server = Server(
    "everything",
    version="1.0.0",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_list_resource_templates=list_templates,
    on_read_resource=read_resource,
    on_subscribe_resource=subscribe,
    on_unsubscribe_resource=unsubscribe,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_completion=complete,
    on_set_logging_level=set_level,
)
options = server.create_initialization_options(
    NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
)


async def stdio():
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, options)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        import uvicorn

        app = server.streamable_http_app(retry_interval=1000)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        asyncio.run(stdio())
