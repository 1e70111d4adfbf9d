// An MCP server that speaks only the 2026-07-28 revision, made with the official
// TypeScript SDK v2 (`@modelcontextprotocol/server`, installed by .ci/run in
// target/ci-node; run with NODE_PATH=target/ci-node/node_modules). A 2025-era opening
// (`initialize`) is refused, as `legacy: 'reject'` makes it: the error names the one
// version it speaks. hookhost's upstream tests use it as a modern-only upstream.
//
//     node modern_upstream.cjs stdio
//     node modern_upstream.cjs http   (prints "listening http://127.0.0.1:PORT/mcp")
//
// Tools:
//   echo {text}      answers the text;
//   confirm {action} a multi-round-trip request: the first round answers `input_required`
//                    with an elicitation (`confirm: boolean`) and a requestState naming
//                    the action; the retry must carry both back, and is answered
//                    "confirmed ACTION" or "declined ACTION" (an error when the state
//                    does not match the action: it was tampered with).

'use strict';

const {
  McpServer,
  createMcpHandler,
  inputRequired,
  acceptedContent,
} = require('@modelcontextprotocol/server');
const { serveStdio } = require('@modelcontextprotocol/server/stdio');
const { z } = require('zod');

function server() {
  const mcp = new McpServer(
    { name: 'modern-upstream', version: '1.0.0' },
    { capabilities: { tools: {} } },
  );
  mcp.registerTool(
    'echo',
    { description: 'Answers the text', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  mcp.registerTool(
    'confirm',
    {
      description: 'Asks the user to confirm an action (a multi-round-trip request)',
      inputSchema: z.object({ action: z.string() }),
    },
    async ({ action }, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      if (!responses) {
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({
              message: `Really ${action}?`,
              requestedSchema: {
                type: 'object',
                properties: { confirm: { type: 'boolean' } },
                required: ['confirm'],
              },
            }),
          },
          requestState: `action:${action}`,
        });
      }
      const state = ctx.mcpReq.requestState();
      if (state !== `action:${action}`) {
        return {
          content: [{ type: 'text', text: `tampered state: ${state}` }],
          isError: true,
        };
      }
      const answer = acceptedContent(responses, 'confirm');
      const verdict = answer && answer.confirm === true ? 'confirmed' : 'declined';
      return { content: [{ type: 'text', text: `${verdict} ${action}` }] };
    },
  );
  return mcp;
}

// node:http in front of the SDK's web-standard handler: the request as a fetch
// Request, the Response's body streamed back as it comes (SSE included).
function serveHttp() {
  const http = require('node:http');
  const handler = createMcpHandler(server, { legacy: 'reject' });
  const listener = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const headers = new Headers();
    for (const [key, value] of Object.entries(req.headers)) {
      headers.set(key, Array.isArray(value) ? value.join(', ') : value);
    }
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      const reader = response.body.getReader();
      res.on('close', () => reader.cancel().catch(() => {}));
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        res.write(value);
      }
    }
    res.end();
  });
  listener.listen(0, '127.0.0.1', () => {
    const { port } = listener.address();
    console.log(`listening http://127.0.0.1:${port}/mcp`);
  });
}

if (process.argv[2] === 'http') {
  serveHttp();
} else {
  serveStdio(server, { legacy: 'reject' });
}
