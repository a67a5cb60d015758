// The official TypeScript SDK client (@modelcontextprotocol/sdk, pinned in package.json):
// the demo's second real client, and a peer of the end-to-end tests.
//
//   node client.mjs URL CALLS_JSON [--terminate] [--name NAME]
//
// Connects over Streamable HTTP, lists the tools, makes each call of CALLS_JSON
// ([[tool, arguments], ...]) in order and, with --terminate, ends the session with a
// DELETE (`client.close()` alone only aborts the GET stream; it sends no DELETE).
// The last stdout line is `RESULT <json>`: what the client itself saw, which the tests
// compare the recording with. Exit 0 on success, 1 on an error, 3 on the timeout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const CLIENT_NAME = "mcp-layers-ts-peer";
const CLIENT_VERSION = "1.32.2";
// The whole run is bounded: a stalled stream must fail the test, not hang it.
const RUN_TIMEOUT_MS = 20000;

const [url, callsJson = "[]", ...flags] = process.argv.slice(2);
if (!url) {
  console.error("usage: node client.mjs URL CALLS_JSON [--terminate] [--name NAME]");
  process.exit(2);
}
const timer = setTimeout(() => {
  console.error("TIMEOUT");
  process.exit(3);
}, RUN_TIMEOUT_MS);

const nameAt = flags.indexOf("--name");
const name = nameAt >= 0 && flags[nameAt + 1] ? flags[nameAt + 1] : CLIENT_NAME;
const client = new Client({ name, version: CLIENT_VERSION });
const transport = new StreamableHTTPClientTransport(new URL(url));
const out = { protocolVersion: null, sessionId: null, tools: [], calls: [], terminated: false };
try {
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion ?? null;
  out.sessionId = transport.sessionId ?? null;
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  for (const [name, args] of JSON.parse(callsJson)) {
    // One failed call must not stop the others: record what the client saw, go on.
    try {
      const r = await client.callTool({ name, arguments: args });
      out.calls.push({ name, isError: r.isError ?? false });
    } catch (err) {
      out.calls.push({ name, isError: null, error: String(err?.message ?? err).slice(0, 200) });
    }
  }
  if (flags.includes("--terminate") && transport.sessionId) {
    await transport.terminateSession();
    out.terminated = true;
  }
  await client.close();
  console.log("RESULT " + JSON.stringify(out));
  clearTimeout(timer);
} catch (err) {
  console.error("ERROR", err?.stack ?? String(err));
  console.log("RESULT " + JSON.stringify(out));
  clearTimeout(timer);
  // An open GET stream would keep the process alive: end it, whatever state it is in.
  await client.close().catch(() => {});
  process.exit(1);
}
