// Package mcphost connects to the MCP servers a harness binds, lists their
// tools as [playbook.Definition] values named mcp.<server>.<tool>, and
// calls them.
//
// A server is reached over stdio (a command this package starts and owns)
// or streamable HTTP (a URL), with github.com/modelcontextprotocol/go-sdk
// as the client. [Connect] starts, initializes and lists within one
// timeout; [ConnectAll] does that for many servers at once.
//
// # Names
//
// A listed tool is named mcp.<server>.<tool>, <tool> being the upstream
// name exactly as the server gives it. An upstream name that cannot
// round-trip as a tool name (characters outside [A-Za-z0-9_-] and the
// dot, empty segments, a composed name over 128 bytes) is kept as is and
// reported in [Tool.Problem]; nothing is renamed or dropped.
//
// # Definitions
//
// [Tool.Definition] has Source "mcp", the composed Name, the upstream
// description, Permissions nil (MCP has no permissions: the server does
// not say, which is not "none"), and InputSchema and
// OutputSchema as the upstream JSON, byte for byte as the server sent
// them: whatever draft a schema declares is kept, and no $ref is resolved
// or fetched. An absent outputSchema stays absent (nil).
//
// MCP tool annotations are hints. They map only where they speak:
//
//   - readOnlyHint true: RiskClass "read", SideEffecting false.
//   - readOnlyHint false (present): SideEffecting true; a tool that is not
//     read-only may modify its environment.
//   - destructiveHint true: SideEffecting true.
//   - readOnlyHint true together with destructiveHint true contradict each
//     other: SideEffecting true and RiskClass unknown, never "read".
//   - anything else (no annotations, a hint absent, null or not a boolean,
//     destructiveHint false alone, idempotentHint, openWorldHint): unknown,
//     RiskClass "" and SideEffecting nil.
//
// RequiresApproval is always nil: MCP does not say.
//
// Absent is not false. go-sdk v1.8.0 decodes ToolAnnotations.ReadOnlyHint
// (and IdempotentHint) as plain bools, so it cannot tell them apart
// (DestructiveHint and OpenWorldHint are *bool). This package therefore
// reads the raw tools/list result, as it came off the wire, next to
// go-sdk's decoding; the raw result also gives the schemas byte for byte
// (go-sdk decodes them into map[string]any, which nothing keeps: a
// client middleware replaces them with their raw text in each result
// before go-sdk filters and caches it, and [Tool.Upstream] holds the
// same text, so a listing of thousands of tools keeps each schema once,
// as bytes; a result go-sdk may answer again from its cache, one with a
// ttlMs, keeps its raw text for that). A go-sdk (v1.7+) server, in
// turn, writes "readOnlyHint": false for every tool that has annotations
// at all, even only a title: on the wire that is an explicit false, and
// maps to SideEffecting true.
//
// go-sdk fails a whole tools/list page when one tool in it does not
// decode, and leaves out tools with invalid x-mcp-header annotations.
// This package lists the page's other tools and reports those in
// [Tool.Problem].
//
// # The wire
//
// Every message a server sends (each stdio line; each streamable HTTP
// response body of a successful status and each server-sent event's data)
// is checked before go-sdk decodes it, in one pass
// (github.com/go-json-experiment/json/jsontext). It must be exactly one
// JSON object, with valid UTF-8, no lone surrogate escape (\ud800), no
// member name twice in an object and no two names in an object that
// differ only by case ("result" and "Result": decoders that match names
// without regard to case would read either), at any depth. Anything else,
// a JSON-RPC batch (array) included, is a protocol error: the pending
// call fails with an [*Error] saying what was wrong (member names
// redacted and cut short, nothing else of the message shown) that wraps
// [ErrProtocol]; the server is unhealthy ([Server.Health]); its session
// is closed; and later calls and listings fail at once, sending nothing.
//
// Numbers keep their exact value. go-sdk decodes structuredContent into
// map[string]any, with float64 numbers; [Server.Call] replaces that with
// the raw structuredContent of the tools/call response as it came off
// the wire (a json.RawMessage, whitespace removed), and [ResultJSON]
// returns it as is, and JSON text content likewise. Decoded content
// without the raw text is refused where a float64 may have rounded a
// number.
//
// # Processes and errors
//
// A stdio server runs in its own process group with a minimal
// environment (see [ServerConfig.Env]); its stderr is kept in a 4 KiB
// ring whose last lines go into errors. A start-up that fails kills the
// process group; so does [Server.Close], after giving the server the
// chance to exit when its stdin closes. A server that exits or writes
// non-JSON to stdout during start-up is reported at once, not at the
// timeout. Errors are [*Error] values, and never hold a configured secret.
package mcphost
