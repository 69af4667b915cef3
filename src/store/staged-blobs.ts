import type { Insertable, Kysely } from 'kysely';
import type { Database, StagedBlobsTable } from './schema.js';

/**
 * The blobs of running remote attempts (staged inputs, uploaded output). Every query is by key,
 * by job (index staged_blobs_job), or over the table itself, which holds only live attempts' rows.
 */
export async function insertStagedBlob(db: Kysely<Database>, row: Insertable<StagedBlobsTable>): Promise<void> {
  await db.insertInto('staged_blobs').values(row).execute();
}

export async function deleteStagedBlob(db: Kysely<Database>, key: string): Promise<void> {
  await db.deleteFrom('staged_blobs').where('key', '=', key).execute();
}

/** The output an attempt uploaded (at most one is kept). */
export function outputsOf(db: Kysely<Database>, uuid: string, lease: string) {
  return db
    .selectFrom('staged_blobs')
    .select(['key', 'content_type', 'size'])
    .where('job_uuid', '=', uuid)
    .where('lease_owner', '=', lease)
    .where('kind', '=', 'output')
    .execute();
}

export interface BlobOwner {
  key: string;
  blob_lease: string;
  status: string | null;
  lease_owner: string | null;
  result_key: string | null;
}

/** One job's staged blobs with the job's state (to tell live attempts from ended ones). */
export function blobsOfJob(db: Kysely<Database>, uuid: string): Promise<BlobOwner[]> {
  return db
    .selectFrom('staged_blobs as b')
    .leftJoin('jobs as j', 'j.uuid', 'b.job_uuid')
    .select(['b.key', 'b.lease_owner as blob_lease', 'j.status', 'j.lease_owner', 'j.result_key'])
    .where('b.job_uuid', '=', uuid)
    .execute();
}

/** Staged blobs whose attempt has ended (job gone, not processing, or held by another lease). */
export function staleBlobs(db: Kysely<Database>, limit: number): Promise<BlobOwner[]> {
  return db
    .selectFrom('staged_blobs as b')
    .leftJoin('jobs as j', 'j.uuid', 'b.job_uuid')
    .select(['b.key', 'b.lease_owner as blob_lease', 'j.status', 'j.lease_owner', 'j.result_key'])
    .where((eb) =>
      eb.or([
        eb('j.uuid', 'is', null),
        eb('j.status', '<>', 'processing'),
        eb('j.lease_owner', 'is', null),
        eb('j.lease_owner', '<>', eb.ref('b.lease_owner')),
      ]),
    )
    .limit(limit)
    .execute();
}
