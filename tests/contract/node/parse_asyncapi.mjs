// Parses an AsyncAPI document with AsyncAPI's own parser and prints its diagnostics as JSON lines.
// Usage: node parse_asyncapi.mjs <document.json>. Exit 0 when the parser reports no error, 1 otherwise.
import { readFile } from "node:fs/promises";
import { Parser, DiagnosticSeverity } from "@asyncapi/parser";

const path = process.argv[2];
if (!path) {
  console.error("usage: node parse_asyncapi.mjs <document.json>");
  process.exit(2);
}
const parser = new Parser();
const { document, diagnostics } = await parser.parse(await readFile(path, "utf8"));
const severity = { [DiagnosticSeverity.Error]: "error", [DiagnosticSeverity.Warning]: "warning",
  [DiagnosticSeverity.Information]: "information", [DiagnosticSeverity.Hint]: "hint" };
for (const found of diagnostics) {
  console.log(JSON.stringify({ severity: severity[found.severity], code: found.code, message: found.message, path: found.path }));
}
const errors = diagnostics.filter((found) => found.severity === DiagnosticSeverity.Error).length;
if (document === undefined || errors > 0) {
  console.error(`${path}: ${errors} error(s); the document ${document === undefined ? "did not parse" : "parsed"}`);
  process.exit(1);
}
