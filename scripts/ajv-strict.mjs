#!/usr/bin/env node
// Compiles JSON Schemas with Ajv's JSON Schema 2020-12 class in strict
// mode (https://ajv.js.org/strict-mode.html): unknown keywords, ignored
// keywords, types a keyword needs but the schema does not state, required
// properties that are not defined, union types... are errors. Used by
// schema's TestAjvStrict (go test ./schema); run by hand with
//   node scripts/ajv-strict.mjs schema/openplaybook-1.6.schema.json schema/harness.schema.json
// It prints every problem of every file (not only the first), one line
// each as "FILE: message", and exits 1 if there is any, 2 on bad usage.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(path.join(root, "package.json"));
const Ajv2020 = require("ajv/dist/2020").default;

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node scripts/ajv-strict.mjs SCHEMA.json...");
  process.exit(2);
}
let failed = false;
for (const file of files) {
  let schema;
  try {
    schema = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    console.log(`${file}: ${e.message}`);
    failed = true;
    continue;
  }
  // First every strict-mode problem, logged instead of thrown...
  const problems = [];
  const collect = (...args) => problems.push(args.join(" "));
  try {
    new Ajv2020({ strict: "log", allErrors: true, logger: { log() {}, warn: collect, error: collect } }).compile(schema);
  } catch (e) {
    problems.push(e.message);
  }
  // ...then the verdict of strict: true itself.
  try {
    new Ajv2020({ strict: true, allErrors: true }).compile(schema);
  } catch (e) {
    if (!problems.includes(e.message)) problems.push(e.message);
  }
  for (const p of problems) console.log(`${file}: ${p}`);
  if (problems.length > 0) failed = true;
  else console.log(`${file}: compiles in strict mode`);
}
process.exit(failed ? 1 : 0);
