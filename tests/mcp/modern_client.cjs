// The official TypeScript SDK v2 client (`@modelcontextprotocol/client`, installed by
// .ci/run in target/ci-node; run with NODE_PATH=target/ci-node/node_modules) against
// hookhost, pinned to MCP 2026-07-28 and in `auto` mode, over HTTP and stdio. Every check
// throws; the last line says what passed.
//
//     node modern_client.cjs http URL [TOKEN]
//     node modern_client.cjs stdio HOOKHOST DATA CONFIG
//
// For each mode: the negotiated revision is 2026-07-28; the tools are listed; a file
// written in a new hookhost session (`"dev.hookhost/session": "new"` in `_meta`) is read
// back in that session, named by the id the result's `_meta` gives. Over HTTP a read that
// names no session runs in an ephemeral one, where the file is not; over stdio the
// connection is the session, where it is.

'use strict';

const { Client, StreamableHTTPClientTransport } = require('@modelcontextprotocol/client');
const { StdioClientTransport } = require('@modelcontextprotocol/client/stdio');

const MODERN = '2026-07-28';
const SESSION_META = 'dev.hookhost/session';

function check(ok, what) {
  if (!ok) {
    throw new Error(`check failed: ${what}`);
  }
}

function text(result) {
  return result.content
    .filter((block) => block.type === 'text')
    .map((block) => block.text)
    .join('\n');
}

function transport(kind, args) {
  if (kind === 'http') {
    const [url, token] = args;
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  }
  const [hookhost, data, config] = args;
  return new StdioClientTransport({
    command: hookhost,
    args: ['--data', data, '--config', config, 'serve'],
    stderr: 'ignore',
  });
}

async function session(kind, args, mode) {
  const client = new Client(
    { name: 'hookhost-test', version: '1.0.0' },
    { versionNegotiation: { mode } },
  );
  await client.connect(transport(kind, args));
  try {
    const version = client.getNegotiatedProtocolVersion();
    check(version === MODERN, `${JSON.stringify(mode)} negotiated ${version}`);
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name);
    check(names.includes('write_file') && names.includes('read_file'), `tools ${names}`);

    const path = '/workspace/modern.txt';
    const written = await client.callTool({
      name: 'write_file',
      arguments: { path, content: `written by ${JSON.stringify(mode)}` },
      _meta: { [SESSION_META]: 'new' },
    });
    check(!written.isError, `write_file: ${text(written)}`);
    const id = written._meta && written._meta[SESSION_META];
    check(typeof id === 'string' && id !== 'new', `no session named: ${JSON.stringify(written._meta)}`);
    const read = await client.callTool({
      name: 'read_file',
      arguments: { path },
      _meta: { [SESSION_META]: id },
    });
    check(text(read).includes(`written by ${JSON.stringify(mode)}`), `read_file: ${text(read)}`);
    const unnamed = await client.callTool({ name: 'read_file', arguments: { path } });
    if (kind === 'http') {
      check(/no such file/i.test(text(unnamed)), `an ephemeral session read ${text(unnamed)}`);
    } else {
      check(text(unnamed).includes('written by'), `the connection's session read ${text(unnamed)}`);
    }
    return version;
  } finally {
    await client.close();
  }
}

async function main() {
  const [kind, ...args] = process.argv.slice(2);
  check(kind === 'http' || kind === 'stdio', 'usage: modern_client.cjs http|stdio …');
  const pinned = await session(kind, args, { pin: MODERN });
  const auto = await session(kind, args, 'auto');
  console.log(`modern client ok: ${kind}, pinned ${pinned}, auto ${auto}`);
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
