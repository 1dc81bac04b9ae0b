#!/usr/bin/env node
// A schema-driven GraphQL mock for the connector contract tests of the
// GraphQL providers (Linear, Shopify Admin): the GraphQL counterpart of
// Prism serving an OpenAPI description.
//
//   node scripts/graphql-mock.mjs --port 4011 --schema connector/providers/descriptions/linear.graphql
//   node scripts/graphql-mock.mjs --schema connector/providers/descriptions/linear.graphql --check connector/providers/linear.json
//
// Serve mode answers POST on any path ("/", "/graphql", "/admin/api/2025-10/graphql.json")
// with a JSON body {"query", "variables", "operationName"}:
//   - no Authorization and no X-Shopify-Access-Token header: 401;
//   - a body that is not a JSON object with a string "query": 400;
//   - a document that does not parse or is not valid against the schema,
//     or variables that do not coerce to the operation's variable types:
//     200 with {"errors": [...]} and no data, as real GraphQL servers do;
//   - otherwise the document is executed against the schema with
//     @graphql-tools/mock (addMocksToSchema, preserveResolvers false):
//     200 with {"data": ...}.
// Answers are deterministic: the same request gets the same answer (the
// random source is reseeded per request, scalars have fixed mocks, an
// enum answers its first value, and an abstract type answers the first of
// its possible types that the document names in a type condition, else
// its first possible type). It prints "listening on PORT" once ready.
//
// Check mode validates the query document of every tool of a connector
// file (tools[].request.graphql.query) against the schema, prints one line
// per problem as "FILE: TOOL: message" and exits 1 if there is any (0 and
// "ok N documents" otherwise). Bad usage exits 2.
import { readFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(path.join(root, "package.json"));
const {
  buildSchema,
  execute,
  GraphQLError,
  isAbstractType,
  isEnumType,
  isScalarType,
  parse,
  validate,
  visit,
} = require("graphql");
const { addMocksToSchema } = require("@graphql-tools/mock");

function usage(msg) {
  if (msg) console.error(`graphql-mock: ${msg}`);
  console.error(
    "usage: node scripts/graphql-mock.mjs --port N --schema FILE.graphql\n" +
      "       node scripts/graphql-mock.mjs --schema FILE.graphql --check CONNECTOR.json",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const eq = a.indexOf("=");
    const name = eq > 0 ? a.slice(0, eq) : a;
    if (!["--port", "--schema", "--check", "--host"].includes(name)) usage(`unknown argument ${a}`);
    const value = eq > 0 ? a.slice(eq + 1) : argv[++i];
    if (value === undefined) usage(`${name} needs a value`);
    opts[name.slice(2)] = value;
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
if (!opts.schema) usage("--schema is required");
if (!opts.check && !opts.port) usage("--port or --check is required");

let schema;
try {
  schema = buildSchema(readFileSync(opts.schema, "utf8"));
} catch (e) {
  console.error(`${opts.schema}: ${e.message}`);
  process.exit(1);
}

// parseAndValidate returns the document or the GraphQL errors that make
// it unusable against the schema.
function parseAndValidate(source) {
  let doc;
  try {
    doc = parse(source);
  } catch (e) {
    return { errors: [e instanceof GraphQLError ? e : new GraphQLError(String(e.message))] };
  }
  const errors = validate(schema, doc);
  return errors.length > 0 ? { errors } : { doc };
}

if (opts.check) {
  let spec;
  try {
    spec = JSON.parse(readFileSync(opts.check, "utf8"));
  } catch (e) {
    console.log(`${opts.check}: ${e.message}`);
    process.exit(1);
  }
  let problems = 0;
  let documents = 0;
  for (const [i, tool] of (spec.tools ?? []).entries()) {
    const name = tool?.definition?.name ?? `tools[${i}]`;
    const gql = tool?.request?.graphql;
    if (!gql) continue;
    documents++;
    if (typeof gql.query !== "string") {
      console.log(`${opts.check}: ${name}: request.graphql.query is not a string`);
      problems++;
      continue;
    }
    const { errors } = parseAndValidate(gql.query);
    for (const e of errors ?? []) {
      const loc = e.locations?.[0];
      console.log(`${opts.check}: ${name}: ${e.message}${loc ? ` (line ${loc.line}, column ${loc.column})` : ""}`);
      problems++;
    }
  }
  if (problems > 0) process.exit(1);
  console.log(`ok ${documents} documents`);
  process.exit(0);
}

// Deterministic random source (mulberry32), reseeded for every request so
// the mock's list lengths, key uuids and unmocked choices repeat.
let seed = 1;
Math.random = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};

// scalarMock is a fixed, plausible value for a scalar by its name.
function scalarMock(name) {
  const n = name.toLowerCase();
  if (n === "int") return () => 1;
  if (n === "float") return () => 1.5;
  if (n === "boolean") return () => true;
  if (n === "string") return () => "mock string";
  if (n === "id") return () => `mock-id-${++idCounter}`;
  if (n.includes("datetime") || n === "timestamp") return () => "2026-01-15T12:00:00Z";
  if (n.includes("date")) return () => "2026-01-15";
  if (n.includes("url") || n.includes("uri")) return () => "https://example.com/mock";
  if (n.includes("json")) return () => ({});
  if (n.includes("money") || n.includes("decimal")) return () => "10.00";
  if (n.includes("int64") || n.includes("bigint")) return () => "1";
  if (n.includes("html")) return () => "<p>mock</p>";
  if (n.includes("duration")) return () => "P1D";
  if (n.includes("color")) return () => "#000000";
  if (n.includes("utcoffset")) return () => "+00:00";
  if (n.includes("arn")) return () => "arn:aws:events:us-east-1::event-source/mock";
  return () => "mock";
}

let idCounter = 0;
let preferredTypes = new Set();
const mocks = {};
for (const type of Object.values(schema.getTypeMap())) {
  if (type.name.startsWith("__")) continue;
  if (isScalarType(type)) mocks[type.name] = scalarMock(type.name);
  else if (isEnumType(type)) {
    const first = type.getValues()[0]?.value;
    mocks[type.name] = () => first;
  } else if (isAbstractType(type)) {
    const possible = schema.getPossibleTypes(type).map((t) => t.name);
    mocks[type.name] = () => ({
      __typename: possible.find((t) => preferredTypes.has(t)) ?? possible[0],
    });
  }
}

// typeConditions are the type names of a document's inline fragments and
// fragment definitions.
function typeConditions(doc) {
  const names = new Set();
  visit(doc, {
    InlineFragment(node) {
      if (node.typeCondition) names.add(node.typeCondition.name.value);
    },
    FragmentDefinition(node) {
      names.add(node.typeCondition.name.value);
    },
  });
  return names;
}

async function run(body) {
  const { doc, errors } = parseAndValidate(body.query);
  if (errors) return { errors: errors.map((e) => e.toJSON()) };
  seed = 1;
  idCounter = 0;
  preferredTypes = typeConditions(doc);
  const mocked = addMocksToSchema({ schema, mocks, preserveResolvers: false });
  const result = await execute({
    schema: mocked,
    document: doc,
    variableValues: body.variables ?? undefined,
    operationName: body.operationName ?? undefined,
  });
  const out = {};
  if (result.errors) out.errors = result.errors.map((e) => e.toJSON());
  if ("data" in result && result.data !== undefined) out.data = noUserErrors(result.data);
  return out;
}

// noUserErrors empties every userErrors list in a mocked answer: the mock
// answers a mutation's success path (a schema-driven mock would otherwise
// invent errors for every mutation).
function noUserErrors(v) {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map(noUserErrors);
  for (const k of Object.keys(v)) v[k] = k === "userErrors" && Array.isArray(v[k]) ? [] : noUserErrors(v[k]);
  return v;
}

function send(res, status, value) {
  const text = JSON.stringify(value);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

// Requests run one at a time: the mocks read per-request state.
let queue = Promise.resolve();

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (req.method !== "POST") {
      res.setHeader("Allow", "POST");
      return send(res, 405, { errors: [{ message: "GraphQL requests are POST" }] });
    }
    if (!req.headers["authorization"] && !req.headers["x-shopify-access-token"]) {
      return send(res, 401, {
        errors: [{ message: "Authentication required: send Authorization or X-Shopify-Access-Token", extensions: { code: "UNAUTHENTICATED" } }],
      });
    }
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return send(res, 400, { errors: [{ message: "Request body is not JSON", extensions: { code: "BAD_REQUEST" } }] });
    }
    if (body === null || typeof body !== "object" || Array.isArray(body) || typeof body.query !== "string") {
      return send(res, 400, { errors: [{ message: 'Request body must be a JSON object with a string "query"', extensions: { code: "BAD_REQUEST" } }] });
    }
    if (body.variables != null && (typeof body.variables !== "object" || Array.isArray(body.variables))) {
      return send(res, 400, { errors: [{ message: '"variables" must be a JSON object', extensions: { code: "BAD_REQUEST" } }] });
    }
    queue = queue
      .then(() => run(body))
      .then(
        (out) => send(res, 200, out),
        (e) => send(res, 500, { errors: [{ message: `mock failed: ${e.message}` }] }),
      );
  });
});

server.listen(Number(opts.port), opts.host ?? "127.0.0.1", () => {
  console.log(`listening on ${server.address().port}`);
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => server.close(() => process.exit(0)));
