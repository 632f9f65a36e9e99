// validate.mjs checks an AsyncAPI document with the official parser (@asyncapi/parser v3) and
// checks every message example against the message's payload and headers schemas (which the
// parser does not). It prints every diagnostic and exits 1 when any has severity error, an
// example does not match, or the document cannot be parsed; 0 otherwise.
// Usage: node validate.mjs [path], default ../../docs/asyncapi.yaml.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Parser, fromFile, DiagnosticSeverity } from '@asyncapi/parser';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';

const here = path.dirname(fileURLToPath(import.meta.url));
const file = path.resolve(process.argv[2] ?? path.join(here, '..', '..', 'docs', 'asyncapi.yaml'));

const names = {
  [DiagnosticSeverity.Error]: 'error',
  [DiagnosticSeverity.Warning]: 'warning',
  [DiagnosticSeverity.Information]: 'info',
  [DiagnosticSeverity.Hint]: 'hint',
};

const parser = new Parser();
const { document, diagnostics } = await fromFile(parser, file).parse();

let errors = 0;
for (const d of diagnostics) {
  if (d.severity === DiagnosticSeverity.Error) errors++;
  const where = d.path && d.path.length ? d.path.join('.') : '(document)';
  const line = d.range ? `:${d.range.start.line + 1}` : '';
  console.log(`${names[d.severity] ?? d.severity} ${d.code} ${file}${line} ${where}: ${d.message}`);
}
if (!document) {
  console.log(`asyncapi: ${file} could not be parsed`);
  process.exit(1);
}
// AsyncAPI schemas are JSON Schema draft 07 plus a few keywords Ajv must ignore.
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
let examples = 0;
for (const message of document.allMessages()) {
  for (const example of message.examples()) {
    for (const [part, schema, value] of [
      ['payload', message.payload(), example.payload()],
      ['headers', message.headers(), example.headers()],
    ]) {
      if (value === undefined || !schema) continue;
      examples++;
      const validateExample = ajv.compile(schema.json());
      if (!validateExample(value)) {
        errors++;
        for (const e of validateExample.errors) {
          console.log(`error example ${message.name() ?? message.id()}/${example.name() ?? '?'} ${part}${e.instancePath}: ${e.message}`);
        }
      }
    }
  }
}

if (errors > 0) {
  console.log(`asyncapi: ${errors} error(s) in ${file}`);
  process.exit(1);
}
const channels = document.channels().length;
const operations = document.operations().length;
const messages = document.components().messages().length;
console.log(`asyncapi: ${file} is valid AsyncAPI ${document.version()} ` +
  `(${channels} channels, ${operations} operations, ${messages} component messages, ${examples} example parts checked, ` +
  `${diagnostics.length} non-error diagnostics)`);
