// The TypeScript SDK reference client: the official @modelcontextprotocol/sdk Client
// (pinned by the lab, found through $LAB_TS_SDK) inside a minimal agent loop.
//
//   LAB_TS_SDK=<node_modules/@modelcontextprotocol/sdk> node ts_agent.mjs MCP_URL MODEL_URL PROMPT
//
// Same loop as sdk_agent.py: connect (Streamable HTTP, the SDK's defaults), list the tools,
// offer them to the model (Anthropic Messages, one JSON answer per turn), call what it asks
// for, hand the result back (an exception becomes an error result), until it answers with
// text. Without a server the model is asked without tools. Any retry on the wire is the
// SDK's own or the model's. At the end it ends the session as an application does
// (`transport.terminateSession()`: DELETE), then closes. Prints the final text, then
// `RESULT <json>`. Exit 0 when the model answered with text, 1 otherwise; the run is
// bounded.
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const NAME = "lab-ts-sdk";
const MAX_TURNS = 4;
// Past the SDK's own 60 s request timeout, so that its timeout is what shows.
const RUN_TIMEOUT_MS = 100000;

const [mcpUrl, modelUrl, prompt = "Call the echo tool with text hello"] = process.argv.slice(2);
const sdkDir = process.env.LAB_TS_SDK;
if (!mcpUrl || !modelUrl || !sdkDir) {
  console.error("usage: LAB_TS_SDK=DIR node ts_agent.mjs MCP_URL MODEL_URL [PROMPT]");
  process.exit(2);
}
const timer = setTimeout(() => {
  console.error("TIMEOUT");
  process.exit(3);
}, RUN_TIMEOUT_MS);

const load = (p) => import(pathToFileURL(join(sdkDir, "dist", "esm", p)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { readFileSync } = await import("node:fs");
const version = JSON.parse(readFileSync(join(sdkDir, "package.json"), "utf8")).version;

const out = { connectError: null, tools: [], calls: [], final: null };
const errorText = (err) => `${err?.name ?? "Error"}: ${err?.message ?? String(err)}`;

async function askModel(messages, tools) {
  const body = { model: "lab-model", max_tokens: 1024, messages };
  if (tools.length) body.tools = tools;
  const response = await fetch(`${modelUrl}/v1/messages`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "anthropic-version": "2023-06-01",
      "x-api-key": "lab-dummy-key",
      "user-agent": `${NAME}/${version}`,
    },
    body: JSON.stringify(body),
  });
  return await response.json();
}

async function converse(client, tools) {
  const offered = tools.map((t) => ({
    name: t.name,
    description: t.description ?? "",
    input_schema: t.inputSchema,
  }));
  const messages = [{ role: "user", content: prompt }];
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const reply = await askModel(messages, offered);
    const content = reply.content ?? [];
    const uses = content.filter((b) => b.type === "tool_use");
    if (!uses.length || !client) {
      out.final = content.map((b) => b.text ?? "").join("");
      return;
    }
    messages.push({ role: "assistant", content });
    const results = [];
    for (const use of uses) {
      let text;
      let isError;
      try {
        const r = await client.callTool({ name: use.name, arguments: use.input ?? {} });
        text = (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
        isError = r.isError ?? false;
      } catch (err) {
        // The error goes back to the model, as the agents do.
        text = errorText(err);
        isError = true;
      }
      out.calls.push({ tool: use.name, isError, text });
      results.push({ type: "tool_result", tool_use_id: use.id, content: text, is_error: isError });
    }
    messages.push({ role: "user", content: results });
  }
}

let code = 0;
const client = new Client({ name: NAME, version });
const transport = new StreamableHTTPClientTransport(new URL(mcpUrl));
try {
  let connected = false;
  try {
    await client.connect(transport);
    connected = true;
  } catch (err) {
    out.connectError = errorText(err);
  }
  let tools = [];
  if (connected) {
    try {
      tools = (await client.listTools()).tools;
    } catch (err) {
      out.listError = errorText(err);
    }
  }
  out.tools = tools.map((t) => t.name);
  await converse(connected ? client : null, tools);
} catch (err) {
  out.crash = errorText(err);
}
// End the session as an application does: DELETE it (the SDK treats a 405, a server that
// does not let clients end sessions, as done; anything else it throws, and the harness
// notes it), then close the transport.
if (transport.sessionId) {
  try {
    await transport.terminateSession();
  } catch (err) {
    out.terminateError = errorText(err);
  }
}
try {
  await client.close();
} catch (err) {
  out.closeError = errorText(err);
}
if (out.final) console.log(out.final);
else code = 1;
console.log("RESULT " + JSON.stringify(out));
clearTimeout(timer);
process.exitCode = code;
