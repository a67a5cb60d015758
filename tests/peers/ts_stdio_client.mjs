// The official TypeScript SDK's stdio client (the demo's pinned @modelcontextprotocol/sdk),
// for the `mcp-layers wrap` tests:
//
//   node ts_stdio_client.mjs SDK_DIR COMMAND [ARGS...]
//
// Starts COMMAND with StdioClientTransport, initializes, lists the tools, calls `echo`
// and `fail`, closes. The last stdout line is `RESULT <json>`: what the client saw.
import { pathToFileURL } from "node:url";

const [sdkDir, command, ...args] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(`${sdkDir}/dist/esm/${p}`).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

const timer = setTimeout(() => {
  console.error("TIMEOUT");
  process.exit(3);
}, 60000);

const client = new Client({ name: "mcp-layers-ts-stdio-peer", version: "1.32.2" });
await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));
const tools = (await client.listTools()).tools.map((t) => t.name).sort();
const echo = await client.callTool({ name: "echo", arguments: { text: "héllo ✓" } });
const fail = await client.callTool({ name: "fail", arguments: { reason: "nope" } });
await client.close();
clearTimeout(timer);
console.log(
  `RESULT ${JSON.stringify({ tools, echo: echo.content[0].text, echoError: !!echo.isError, failError: !!fail.isError })}`,
);
