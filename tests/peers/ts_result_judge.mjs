// Does the official TypeScript SDK client (1.32.x) accept a result? One JSON line in per
// case, `[method, result]`; one line out, `true`, `false` or `null` (no schema). The
// schemas are the ones `Client.request` validates each method's result with
// (client/index.js). argv[2]: the SDK's dist/esm/types.js.
import * as readline from "node:readline";
import { pathToFileURL } from "node:url";

const types = await import(pathToFileURL(process.argv[2]).href);

const SCHEMAS = {
  initialize: types.InitializeResultSchema,
  ping: types.EmptyResultSchema,
  "tools/call": types.CallToolResultSchema,
  "tools/list": types.ListToolsResultSchema,
  "prompts/list": types.ListPromptsResultSchema,
  "prompts/get": types.GetPromptResultSchema,
  "resources/list": types.ListResourcesResultSchema,
  "resources/templates/list": types.ListResourceTemplatesResultSchema,
  "resources/read": types.ReadResourceResultSchema,
  "completion/complete": types.CompleteResultSchema,
};

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const [method, result] = JSON.parse(line);
  const schema = SCHEMAS[method];
  console.log(schema ? String(schema.safeParse(result).success) : "null");
}
