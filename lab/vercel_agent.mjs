// The Vercel AI SDK as an MCP client: `@ai-sdk/mcp`'s own Streamable HTTP transport and
// client (no MCP SDK underneath), its tools handed to `generateText` with an
// OpenAI-compatible provider pointed at the lab's fake model.
//
//   node vercel_agent.mjs MCP_URL MODEL_URL [PROMPT]
//
// The lab copies this file next to a `node_modules` link to the pinned packages (ai,
// @ai-sdk/mcp, @ai-sdk/openai-compatible, zod), so the imports below resolve there.
// Everything is the library's defaults (its tool-call retries included: that is what the
// matrix measures), except the model connection, which retries nothing (`maxRetries: 0`):
// a retry on the wire must be the MCP client's. A failed connect or tools() runs the turn
// without tools, as the agents do. Prints the final text, then `RESULT <json>`; exit 0
// when the model answered with text. The run is bounded.
import { createMCPClient } from "@ai-sdk/mcp";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs } from "ai";

// Past the lab's cut-stream waits, short of its 120 s kill, so a hang shows as TIMEOUT.
const RUN_TIMEOUT_MS = 100000;
const MAX_STEPS = 5;

const [mcpUrl, modelUrl, prompt = "Call the echo tool with text hello"] = process.argv.slice(2);
if (!mcpUrl || !modelUrl) {
  console.error("usage: node vercel_agent.mjs MCP_URL MODEL_URL [PROMPT]");
  process.exit(2);
}
setTimeout(() => {
  console.error("TIMEOUT");
  process.exit(3);
}, RUN_TIMEOUT_MS).unref();

const out = { connectError: null, toolsError: null, tools: [], final: null, closeError: null };
const errorText = (err) => `${err?.name ?? "Error"}: ${err?.message ?? String(err)}`;

let mcp = null;
let tools = {};
try {
  mcp = await createMCPClient({
    transport: { type: "http", url: mcpUrl },
    // Errors outside a request (the standby GET stream) go to stderr, not to a crash.
    onUncaughtError: (err) => console.error(`uncaught MCP error: ${errorText(err)}`),
  });
} catch (err) {
  out.connectError = errorText(err);
}
if (mcp) {
  try {
    tools = await mcp.tools();
    out.tools = Object.keys(tools);
  } catch (err) {
    out.toolsError = errorText(err);
  }
}

const provider = createOpenAICompatible({
  name: "lab",
  baseURL: `${modelUrl}/v1`,
  apiKey: "lab-dummy-key",
});
let code = 1;
try {
  const result = await generateText({
    model: provider.chatModel("lab-model"),
    tools,
    prompt,
    stopWhen: stepCountIs(MAX_STEPS),
    maxRetries: 0,
  });
  out.final = result.text;
  console.log(result.text);
  code = result.text ? 0 : 1;
} catch (err) {
  console.error(`model turn failed: ${errorText(err)}`);
}
if (mcp) {
  try {
    await mcp.close();
  } catch (err) {
    out.closeError = errorText(err);
  }
}
console.log(`RESULT ${JSON.stringify(out)}`);
process.exit(code);
