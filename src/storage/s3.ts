import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { isStorageUnavailable } from './errors.js';
import type { ResultStore } from './types.js';

export interface S3Options {
  bucket: string;
  prefix: string;
  endpoint?: string;
  region: string;
  forcePathStyle: boolean;
  /** Test seam; normally the clock is the SDK's. */
  clockMs: () => number;
}

/**
 * Results in an S3-compatible bucket, shared by every process and machine. Downloads go straight
 * to the bucket on presigned GET URLs; credentials come from the SDK's usual chain (AWS_* env).
 */
export class S3ResultStore implements ResultStore {
  private readonly client: S3Client;

  constructor(private readonly opts: S3Options) {
    this.client = new S3Client({
      region: opts.region,
      endpoint: opts.endpoint,
      forcePathStyle: opts.forcePathStyle,
      // Checksums only where S3 requires them: S3-compatible servers vary in what they accept.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  private key(key: string): string {
    return this.opts.prefix ? `${this.opts.prefix}/${key}` : key;
  }

  async put(key: string, bytes: Buffer, contentType: string, signal?: AbortSignal): Promise<void> {
    // A single PUT: S3 makes the object visible whole or not at all.
    await this.client.send(
      new PutObjectCommand({ Bucket: this.opts.bucket, Key: this.key(key), Body: bytes, ContentType: contentType }),
      { abortSignal: signal },
    );
  }

  /**
   * HEAD of an object that need not exist: any answer but an outage (404, or 403 for a role
   * without s3:ListBucket) means the bucket is reachable; HeadBucket would need ListBucket.
   */
  async check(signal: AbortSignal): Promise<void> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.opts.bucket, Key: this.key('.readyz') }), {
        abortSignal: signal,
      });
    } catch (err) {
      if (signal.aborted || isStorageUnavailable(err)) throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.opts.bucket, Key: this.key(key) }));
  }

  async signedUrl(key: string, expiresAtMs: number): Promise<string> {
    const now = this.opts.clockMs();
    const expiresIn = Math.max(1, Math.min(7 * 86_400, Math.round((expiresAtMs - now) / 1000)));
    return getSignedUrl(this.client, new GetObjectCommand({ Bucket: this.opts.bucket, Key: this.key(key) }), {
      expiresIn,
    });
  }

  close(): void {
    this.client.destroy();
  }
}
