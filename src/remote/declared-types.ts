import fs from 'node:fs';
import { z } from 'zod';
import { ConfigError, parseDuration } from '../config.js';
import { JobError } from '../errors.js';
import { type JobType } from '../processors/types.js';
import { SLOT_NAMES } from '../contract/api.js';

/**
 * Job types served by remote workers, declared in JOB_TYPES_FILE in the shape of one entry of
 * GET /api/v1/job-types. Each becomes an ordinary catalogue entry (so it validates, lists and
 * appears in the OpenAPI document like a built-in type) marked `remote`.
 */
const slotSpec = z.strictObject({
  required: z.boolean(),
  min: z.number().int().min(0).max(100),
  max: z.number().int().min(1).max(100),
  accepts: z.enum(['image', 'audio', 'video']),
  description: z.string().max(1000).default(''),
});

const declaredType = z.strictObject({
  name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be lowercase letters, digits and dashes (at most 63)'),
  description: z.string().min(1).max(2000),
  slots: z.partialRecord(z.enum(SLOT_NAMES), slotSpec).default({}),
  models: z
    .array(z.strictObject({ name: z.string().min(1).max(100), description: z.string().max(1000).default('') }))
    .min(1),
  /** JSON Schema of the non-media fields of `input` (an object schema). */
  options: z.record(z.string(), z.unknown()).default({ type: 'object', properties: {}, additionalProperties: false }),
  timeout: z.string().optional(),
});

const fileSchema = z.strictObject({ job_types: z.array(declaredType).min(1) });

/** Reads and checks JOB_TYPES_FILE; any problem is a ConfigError naming the file and the field. */
export function loadDeclaredTypes(file: string): JobType[] {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`JOB_TYPES_FILE ${file}: ${(err as Error).message}`);
  }
  return parseDeclaredTypes(raw, file);
}

export function parseDeclaredTypes(raw: unknown, source = 'JOB_TYPES_FILE'): JobType[] {
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`${source}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  return parsed.data.job_types.map((t, i) => {
    const where = `${source}: job_types.${i}`;
    for (const [slot, spec] of Object.entries(t.slots)) {
      if (spec.min > spec.max) throw new ConfigError(`${where}.slots.${slot}: min is above max`);
    }
    let options: z.ZodObject;
    try {
      const schema = z.fromJSONSchema(t.options);
      if (!(schema instanceof z.ZodObject)) throw new Error('must be a JSON Schema of "type": "object"');
      options = schema;
    } catch (err) {
      throw new ConfigError(`${where}.options: ${(err as Error).message}`);
    }
    const clash = Object.keys(options.shape).find((k) => (SLOT_NAMES as readonly string[]).includes(k));
    if (clash) throw new ConfigError(`${where}.options: "${clash}" is a media slot name, not an option`);
    let timeoutMs: number | undefined;
    if (t.timeout !== undefined) {
      try {
        timeoutMs = parseDuration(t.timeout);
      } catch (err) {
        throw new ConfigError(`${where}.timeout: ${(err as Error).message}`);
      }
    }
    const type: JobType = {
      name: t.name,
      description: t.description,
      slots: t.slots,
      models: t.models,
      options,
      remote: { timeoutMs },
      run: () => Promise.reject(new JobError('internal_error', `${t.name} is served by remote workers`)),
    };
    return type;
  });
}
