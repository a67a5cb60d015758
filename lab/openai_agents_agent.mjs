// The OpenAI Agents SDK for JavaScript as an MCP client: `MCPServerStreamableHttp`, on the
// TypeScript MCP SDK v2 (`@modelcontextprotocol/client`, not the lab's ts-sdk 1.x), its
// tools used by an `Agent` run with the Chat Completions API pointed at the lab's fake
// model.
//
//   OPENAI_AGENTS_DISABLE_TRACING=1 node openai_agents_agent.mjs MCP_URL MODEL_URL [PROMPT]
//
// The lab copies this file next to a `node_modules` link to the pinned packages. Tracing
// (exported to api.openai.com by default) is switched off twice: by the environment and
// by `setTracingDisabled(true)`. Everything else is the SDK's defaults (its MCP tool-error
// handling included), except the model connection, which retries nothing (`maxRetries:
// 0`): a retry on the wire must be the MCP client's. A failed connect runs the turn
// without tools, as the agents do. Prints the final text, then `RESULT <json>`; exit 0
// when the model answered with text. The run is bounded.
import {
  Agent,
  MCPServerStreamableHttp,
  run,
  setDefaultOpenAIClient,
  setOpenAIAPI,
  setTracingDisabled,
} from "@openai/agents";
import OpenAI from "openai";

const RUN_TIMEOUT_MS = 100000;
const MAX_TURNS = 5;

const [mcpUrl, modelUrl, prompt = "Call the echo tool with text hello"] = process.argv.slice(2);
if (!mcpUrl || !modelUrl) {
  console.error("usage: node openai_agents_agent.mjs MCP_URL MODEL_URL [PROMPT]");
  process.exit(2);
}
setTimeout(() => {
  console.error("TIMEOUT");
  process.exit(3);
}, RUN_TIMEOUT_MS).unref();

setTracingDisabled(true);
setDefaultOpenAIClient(
  new OpenAI({ baseURL: `${modelUrl}/v1`, apiKey: "lab-dummy-key", maxRetries: 0 }),
);
setOpenAIAPI("chat_completions");

const out = { connectError: null, final: null, closeError: null };
const errorText = (err) => `${err?.name ?? "Error"}: ${err?.message ?? String(err)}`;

let server = new MCPServerStreamableHttp({ url: mcpUrl, name: "echo" });
try {
  await server.connect();
} catch (err) {
  out.connectError = errorText(err);
  server = null;
}
const agent = new Agent({
  name: "lab",
  instructions: "Use the tools you are given.",
  model: "lab-model",
  mcpServers: server ? [server] : [],
});
let code = 1;
try {
  const result = await run(agent, prompt, { maxTurns: MAX_TURNS });
  const text = String(result.finalOutput ?? "");
  out.final = text;
  console.log(text);
  code = text ? 0 : 1;
} catch (err) {
  console.error(`agent failed: ${errorText(err)}`);
}
if (server) {
  try {
    await server.close();
  } catch (err) {
    out.closeError = errorText(err);
  }
}
console.log(`RESULT ${JSON.stringify(out)}`);
process.exit(code);
