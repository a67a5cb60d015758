// Ax for TypeScript as an MCP client: `AxMCPClient` on `AxMCPStreamableHTTPTransport`
// (Ax's own fetch-based transport, no MCP SDK underneath), its tools used by
// `axMCPChat` with Ax's OpenAI-compatible provider pointed at the lab's fake model.
//
//   LAB_AX_ERA=legacy|modern|auto node ax_agent.mjs MCP_URL MODEL_URL [PROMPT]
//
// The lab copies this file next to a `node_modules` link to the pinned @ax-llm/ax. The
// era is pinned by the lab (`legacy`: 2025-11-25 sessions; `modern`: 2026-07-28,
// stateless); left to `auto`, Ax picks modern against this server. Everything else is
// Ax's defaults, its transport retries included (429/502/503/504, on initialize, ping
// and the list/get/read methods: that is what the matrix measures), except two things:
// its SSRF guard is told to allow plain HTTP on loopback (it refuses both by default),
// and the model connection retries nothing (a retry on the wire must be the MCP
// client's). A failed init runs the turn without tools, as the agents do. Prints the
// final text, then `RESULT <json>`; exit 0 when the model answered with text. Bounded.
import { AxMCPClient, AxMCPStreamableHTTPTransport, ai, axMCPChat } from "@ax-llm/ax";

const RUN_TIMEOUT_MS = 100000;
const MAX_STEPS = 5;

const [mcpUrl, modelUrl, prompt = "Call the echo tool with text hello"] = process.argv.slice(2);
const era = process.env.LAB_AX_ERA || "legacy";
if (!mcpUrl || !modelUrl) {
  console.error("usage: LAB_AX_ERA=ERA node ax_agent.mjs MCP_URL MODEL_URL [PROMPT]");
  process.exit(2);
}
setTimeout(() => {
  console.error("TIMEOUT");
  process.exit(3);
}, RUN_TIMEOUT_MS).unref();

const out = { era, negotiated: null, initError: null, tools: [], final: null, closeError: null };
const errorText = (err) => `${err?.name ?? "Error"}: ${err?.message ?? String(err)}`;

const transport = new AxMCPStreamableHTTPTransport(mcpUrl, {
  ssrfProtection: { allowHTTP: true, allowLoopback: true },
});
let mcp = new AxMCPClient(transport, { namespace: "lab", era });
try {
  await mcp.init();
  out.negotiated = mcp.getProtocolVersion() ?? null;
  out.tools = mcp.getTools().map((t) => t.name);
} catch (err) {
  out.initError = errorText(err);
  mcp = null;
}

const llm = ai({
  name: "openai-compatible",
  apiURL: `${modelUrl}/v1`,
  apiKey: "lab-dummy-key",
  config: { model: "lab-model", stream: false },
  options: { retry: { maxRetries: 0 } },
});
let code = 1;
try {
  const result = await axMCPChat(
    llm,
    { chatPrompt: [{ role: "user", content: prompt }] },
    mcp ? { mcp, maxSteps: MAX_STEPS } : { maxSteps: MAX_STEPS },
  );
  const text = result.response.results?.[0]?.content ?? "";
  out.final = text;
  console.log(text);
  code = text ? 0 : 1;
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
