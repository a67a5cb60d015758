// The official TypeScript SDK's stdio server (the demo's pinned @modelcontextprotocol/sdk)
// with one tool, `echo`, for benchmarks/stdio_bench.py: a real server faster than the
// Python SDK's.
//
//   node ts_stdio_server.mjs SDK_DIR
import { pathToFileURL } from "node:url";

const [sdkDir] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(`${sdkDir}/dist/esm/${p}`).href);
const { Server } = await load("server/index.js");
const { StdioServerTransport } = await load("server/stdio.js");
const { CallToolRequestSchema, ListToolsRequestSchema } = await load("types.js");

const server = new Server({ name: "stdio-bench-ts", version: "1" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [{ name: "echo", inputSchema: { type: "object", properties: { text: { type: "string" } } } }],
}));
server.setRequestHandler(CallToolRequestSchema, async (request) => ({
  content: [{ type: "text", text: String(request.params.arguments?.text ?? "") }],
}));
await server.connect(new StdioServerTransport());
