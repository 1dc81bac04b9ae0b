// A minimal MCP server over stdio, without an SDK, for tests that need
// exact bytes on the wire: tools/list answers with the JSON array in the
// TOOLS environment variable, verbatim. server/discover is unknown to it
// (so clients fall back to initialize), as with pre-2026 servers.
//
// STUBBORN=1 makes it outlive the end of its stdin and ignore SIGTERM, as
// a badly behaved server might; PIDFILE names a file to write its pid to.
const readline = require("readline");
// Raw newlines can only be whitespace in JSON: drop them (framing).
const tools = (process.env.TOOLS || "[]").replace(/[\r\n]/g, "");
if (process.env.STUBBORN) {
  setInterval(() => {}, 1000);
  process.on("SIGTERM", () => console.error("ignoring SIGTERM"));
}
if (process.env.PIDFILE) require("fs").writeFileSync(process.env.PIDFILE, String(process.pid));
const send = (s) => process.stdout.write(s + "\n");
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.id === undefined) return; // a notification
  const id = JSON.stringify(msg.id);
  switch (msg.method) {
    case "initialize":
      send(`{"jsonrpc":"2.0","id":${id},"result":{"protocolVersion":${JSON.stringify(msg.params.protocolVersion)},"capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1.0.0"}}}`);
      break;
    case "tools/list":
      send(`{"jsonrpc":"2.0","id":${id},"result":{"tools":${tools}}}`);
      break;
    case "ping":
      send(`{"jsonrpc":"2.0","id":${id},"result":{}}`);
      break;
    default:
      send(`{"jsonrpc":"2.0","id":${id},"error":{"code":-32601,"message":"Method not found"}}`);
  }
});
