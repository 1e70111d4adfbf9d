// An MCP server that speaks only the 2026-07-28 revision, made with the official
// TypeScript SDK v2 (`@modelcontextprotocol/server`, installed by .ci/run in
// target/ci-node; run with NODE_PATH=target/ci-node/node_modules). A 2025-era opening
// (`initialize`) is refused, as `legacy: 'reject'` makes it: the error names the one
// version it speaks. hookhost's upstream tests use it as a modern-only upstream.
//
//     node modern_upstream.cjs stdio
//     node modern_upstream.cjs stdio both   (the 2025 era's `initialize` served too)
//     node modern_upstream.cjs http   (prints "listening http://127.0.0.1:PORT/mcp")
//
// Tools:
//   echo {text}      answers the text;
//   confirm {action} a multi-round-trip request: the first round answers `input_required`
//                    with an elicitation (`confirm: boolean`) and a requestState naming
//                    the action; the retry must carry both back, and is answered
//                    "confirmed ACTION" or "declined ACTION" (an error when the state
//                    does not match the action: it was tampered with).
//   grow             adds the tool `grown` without telling anyone (a 2026 server's list
//                    changes reach only its listeners): a client sees it when it lists the
//                    tools again.
//
// And the fixtures of the conformance suite's `input-required-result-*` scenarios
// (`@modelcontextprotocol/conformance` 0.2.0, `--requirements 2026-07-28`), which the
// suite runs against hookhost fronting this server: the tools
// `test_input_required_result_{elicitation,sampling,list_roots,request_state,
// multiple_inputs,multi_round,tampered_state,capabilities}` and the prompt
// `test_input_required_result_prompt`, each asking what the suite's descriptions say
// under the keys they name, and answering once given the answers.

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
    { capabilities: { tools: {}, prompts: {} } },
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
  mcp.registerTool('grow', { description: 'Adds the tool grown', inputSchema: z.object({}) }, async () => {
    if (!grown) {
      grown = true;
      addGrown(mcp);
    }
    return { content: [{ type: 'text', text: 'grown' }] };
  });
  if (grown) addGrown(mcp);
  conformanceFixtures(mcp);
  return mcp;
}

// Whether `grow` was called: the server may be made again for each request.
let grown = false;

function addGrown(mcp) {
  mcp.registerTool('grown', { description: 'Added by grow', inputSchema: z.object({}) }, async () => ({
    content: [{ type: 'text', text: 'here' }],
  }));
}

// What the conformance suite's multi-round-trip scenarios ask for.
const NAME_SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string' } },
  required: ['name'],
};
const askName = (message) => inputRequired.elicit({ message, requestedSchema: NAME_SCHEMA });
const sample = (text, maxTokens) =>
  inputRequired.createMessage({
    messages: [{ role: 'user', content: { type: 'text', text } }],
    maxTokens,
  });
const said = (text) => ({ content: [{ type: 'text', text }] });
const EMPTY = { description: 'A conformance fixture (SEP-2322)', inputSchema: z.object({}) };

// The keys of `asked` that `responses` does not answer.
function missing(responses, asked) {
  return Object.keys(asked).filter((key) => !responses || !(key in responses));
}

// A tool that asks `asked` (by key) until every key is answered, then answers `done`.
function asking(mcp, name, asked, done, state) {
  mcp.registerTool(name, EMPTY, async (_args, ctx) => {
    const responses = ctx.mcpReq.inputResponses;
    const left = missing(responses, asked);
    if (left.length > 0) {
      const inputRequests = Object.fromEntries(left.map((key) => [key, asked[key]]));
      return inputRequired(state ? { inputRequests, requestState: state } : { inputRequests });
    }
    return done(responses, ctx.mcpReq.requestState());
  });
}

function conformanceFixtures(mcp) {
  asking(
    mcp,
    'test_input_required_result_elicitation',
    { user_name: askName('What is your name?') },
    (r) => said(`Hello, ${acceptedContent(r, 'user_name')?.name ?? 'stranger'}!`),
  );
  asking(
    mcp,
    'test_input_required_result_sampling',
    { capital_question: sample('What is the capital of France?', 100) },
    (r) => said(`LLM said: ${r.capital_question?.content?.text ?? ''}`),
  );
  asking(
    mcp,
    'test_input_required_result_list_roots',
    { client_roots: inputRequired.listRoots() },
    (r) => said(`roots: ${(r.client_roots?.roots ?? []).map((root) => root.uri).join(', ')}`),
  );
  asking(
    mcp,
    'test_input_required_result_request_state',
    {
      confirm: inputRequired.elicit({
        message: 'Please confirm',
        requestedSchema: {
          type: 'object',
          properties: { ok: { type: 'boolean' } },
          required: ['ok'],
        },
      }),
    },
    (_r, state) => said(state === 'round-1' ? 'state-ok' : `state-bad: ${state}`),
    'round-1',
  );
  asking(
    mcp,
    'test_input_required_result_multiple_inputs',
    {
      user_name: askName('What is your name?'),
      greeting: sample('Generate a greeting', 50),
      client_roots: inputRequired.listRoots(),
    },
    (r) => said(`Hello, ${acceptedContent(r, 'user_name')?.name ?? 'stranger'}!`),
    'multiple',
  );
  asking(
    mcp,
    'test_input_required_result_tampered_state',
    { confirm: askName('Who are you?') },
    (_r, state) => (state === 'signed' ? said('state-ok') : { ...said('tampered'), isError: true }),
    'signed',
  );
  mcp.registerTool('test_input_required_result_multi_round', EMPTY, async (_args, ctx) => {
    const responses = ctx.mcpReq.inputResponses ?? {};
    const state = ctx.mcpReq.requestState();
    if (state === 'round-2' && responses.step2) {
      const color = acceptedContent(responses, 'step2')?.color;
      return said(`favourite colour: ${color}`);
    }
    if (state === 'round-1' && responses.step1) {
      return inputRequired({
        inputRequests: {
          step2: inputRequired.elicit({
            message: 'Step 2: What is your favorite color?',
            requestedSchema: {
              type: 'object',
              properties: { color: { type: 'string' } },
              required: ['color'],
            },
          }),
        },
        requestState: 'round-2',
      });
    }
    return inputRequired({
      inputRequests: { step1: askName('Step 1: What is your name?') },
      requestState: 'round-1',
    });
  });
  // Asks only what the request's client declared it handles.
  mcp.registerTool('test_input_required_result_capabilities', EMPTY, async (_args, ctx) => {
    const envelope = ctx.mcpReq.envelope ?? {};
    const declared =
      envelope['io.modelcontextprotocol/clientCapabilities'] ?? envelope.clientCapabilities ?? {};
    const asked = {};
    if (declared.elicitation) asked.user_name = askName('What is your name?');
    if (declared.sampling) asked.greeting = sample('Generate a greeting', 50);
    const left = missing(ctx.mcpReq.inputResponses, asked);
    if (left.length > 0) {
      return inputRequired({
        inputRequests: Object.fromEntries(left.map((key) => [key, asked[key]])),
      });
    }
    return said(`asked: ${Object.keys(asked).join(', ') || 'nothing'}`);
  });
  mcp.registerPrompt(
    'test_input_required_result_prompt',
    { description: 'A prompt that asks for its context (SEP-2322)' },
    async (ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      if (!responses || !responses.user_context) {
        return inputRequired({
          inputRequests: {
            user_context: inputRequired.elicit({
              message: 'What context should the prompt use?',
              requestedSchema: {
                type: 'object',
                properties: { context: { type: 'string' } },
                required: ['context'],
              },
            }),
          },
        });
      }
      const context = acceptedContent(responses, 'user_context')?.context;
      return {
        messages: [{ role: 'user', content: { type: 'text', text: `Context: ${context}` } }],
      };
    },
  );
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
  // `stdio both`: the 2025 era served too (the benchmark compares the eras on one server).
  serveStdio(server, { legacy: process.argv[3] === 'both' ? 'serve' : 'reject' });
}
