/** Translating what the AWS SDK throws into the typed errors a user can act on (each names what failed and hints what to do). */
import {
  AccessDeniedError,
  ArchivedObjectError,
  BucketNotFoundError,
  ConfigError,
  CredentialsError,
  IndexerError,
  NotAListingError,
  S3UnavailableError,
  UnexpectedError,
} from './errors';

interface AwsError {
  name?: string;
  Code?: string;
  code?: string;
  message?: string;
  errors?: unknown[];
  $metadata?: { httpStatusCode?: number };
  $response?: { headers?: Record<string, string | undefined> };
}

export function statusOf(err: unknown): number | undefined {
  return (err as AwsError)?.$metadata?.httpStatusCode;
}

export function codeOf(err: unknown): string {
  const e = err as AwsError;
  return e?.Code ?? e?.name ?? '';
}

export function isNotFound(err: unknown): boolean {
  const code = codeOf(err);
  return (statusOf(err) === 404 && code !== 'NoSuchBucket') || code === 'NoSuchKey' || code === 'NotFound';
}

/** True for a lost conditional write: 412, or 409 when S3 saw two conditional writes at once. */
export function isConflict(err: unknown): boolean {
  const code = codeOf(err);
  return statusOf(err) === 412 || code === 'PreconditionFailed' || code === 'ConditionalRequestConflict';
}

export function isUnsupported(err: unknown): boolean {
  const code = codeOf(err);
  return statusOf(err) === 501 || code === 'NotImplemented';
}

/** Node's codes of a connection that failed or broke: the endpoint never answered. */
export const CONNECTION_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** Names of a request that timed out, from the SDK or from S3. */
export const TIMEOUT_CODES: ReadonlySet<string> = new Set(['TimeoutError', 'RequestTimeout', 'RequestTimeoutException']);

/** Codes of an answer that never came: the network or the endpoint failed, as the SDK's retries see it. */
const NETWORK_CODES = new Set([...CONNECTION_CODES, ...TIMEOUT_CODES]);

/** The Node system error code of a failed connection (`ECONNREFUSED`), also inside an AggregateError (one per address tried). */
function networkCodeOf(err: unknown): string | undefined {
  const e = err as AwsError;
  for (const code of [e?.code, e?.name, e?.Code]) if (code && NETWORK_CODES.has(code)) return code;
  // The SDK wraps what is not an `Error` of its own realm (as under jest's VM) as "AWS SDK error wrapper for Error: connect ECONNREFUSED …".
  const named = /\b(E[A-Z_]+)\b/.exec(e?.message ?? '')?.[1];
  if (named && NETWORK_CODES.has(named) && e?.message?.startsWith('AWS SDK error wrapper')) return named;
  const first = Array.isArray(e?.errors) ? e.errors[0] : undefined;
  return first === undefined ? undefined : networkCodeOf(first);
}

/** The region of an AWS S3 host name that DNS does not know (a mistyped `--region` gives such a name). */
function unknownRegionOf(detail: string): string | undefined {
  return /\bs3[.-](?:dualstack\.|fips\.)*([a-z0-9-]+)\.amazonaws\.com/.exec(detail)?.[1];
}

/** Credential providers failed: no credentials were found, so none were sent. */
const CREDENTIALS_MISSING = new Set(['CredentialsProviderError', 'ProviderError', 'TokenProviderError']);

/** S3 read the credentials that were sent and refused them. */
const CREDENTIALS_REJECTED = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'TokenRefreshRequired',
]);

/** Turns an SDK error into one of ours, with what the user can do about it. */
export function translateError(err: unknown, operation: string, bucket: string, key?: string): Error {
  if (err instanceof IndexerError) return err;
  const code = codeOf(err);
  const status = statusOf(err);
  const where = key === undefined ? `s3://${bucket}` : `s3://${bucket}/${key}`;
  const detail = (err as AwsError)?.message ?? String(err);
  if (code === 'NoSuchBucket') {
    return new BucketNotFoundError(`Bucket "${bucket}" does not exist`, 'Check the bucket name, region and endpoint', { cause: err });
  }
  if (CREDENTIALS_MISSING.has(code)) {
    const profile = process.env.AWS_PROFILE;
    return profile
      ? new CredentialsError(
          `No AWS credentials were found for profile "${profile}" (AWS_PROFILE), so nothing was sent to S3 for ${operation} on ${where}`,
          `Check that profile "${profile}" is in ~/.aws/config or ~/.aws/credentials (aws configure list-profiles), or unset AWS_PROFILE; DATASTORE_INDEXER_DEBUG=1 shows what the SDK tried`,
          { cause: err },
        )
      : new CredentialsError(
          `No AWS credentials were found, so nothing was sent to S3 for ${operation} on ${where}`,
          'Set AWS_PROFILE to a profile in ~/.aws/config, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; DATASTORE_INDEXER_DEBUG=1 shows what the SDK tried',
          { cause: err },
        );
  }
  if (CREDENTIALS_REJECTED.has(code)) {
    return new CredentialsError(
      `S3 rejected the credentials for ${operation} on ${where} (${code})`,
      'Check AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or refresh your session',
      { cause: err },
    );
  }
  if (status === 301 || status === 307 || code === 'PermanentRedirect' || code === 'AuthorizationHeaderMalformed') {
    const region = (err as AwsError)?.$response?.headers?.['x-amz-bucket-region'];
    if (region || status === 301 || code === 'PermanentRedirect') {
      return new ConfigError(
        region
          ? `Bucket "${bucket}" is in region ${region}, not the region this request was signed for (${operation} on ${where})`
          : `Bucket "${bucket}" is in another region than the one configured (${operation} on ${where}: ${detail})`,
        region
          ? `Pass --region ${region} (or set "region" in the datastore config)`
          : 'Pass the bucket\'s region with --region (or "region" in the datastore config)',
        { cause: err },
      );
    }
  }
  // Archived objects answer 403 too, but no grant would let them be read: only a restore does.
  if (code === 'InvalidObjectState' && key !== undefined) {
    return new ArchivedObjectError(bucket, key, (err as { StorageClass?: string })?.StorageClass, false, { cause: err });
  }
  if (code === 'AccessDenied' || code === 'AllAccessDisabled' || status === 403) {
    return new AccessDeniedError(`Access denied: ${operation} on ${where}`, `Grant this identity s3:${operation} on that resource`, {
      cause: err,
    });
  }
  const network = networkCodeOf(err);
  if (network !== undefined) {
    // The detail names the endpoint (a refused address, or the silent endpoint of a request timeout).
    const region = network === 'ENOTFOUND' ? unknownRegionOf(detail) : undefined;
    return new S3UnavailableError(
      `Could not reach S3 for ${operation} on ${where} (${network}) after every retry: ${detail}`,
      region
        ? `Check --region (or "region" in the datastore config): "${region}" may not be a region S3 serves, e.g. us-east-1 or eu-west-1; else check the network`
        : 'Check the endpoint and network, then retry',
      { cause: err },
    );
  }
  if (status !== undefined && (status >= 500 || code === 'SlowDown')) {
    return new S3UnavailableError(`S3 kept failing on ${operation} ${where}: ${detail}`, 'Retry later; check the endpoint and network', {
      cause: err,
    });
  }
  if (status === undefined) {
    // No answer from S3 and no network failure: a bug or an unexpected runtime error, not an outage.
    const original = err instanceof Error ? err : { name: 'Error', message: String(err) };
    return new UnexpectedError(`${operation} on ${where}`, { name: original.name, message: original.message }, { cause: err });
  }
  return new IndexerError(`S3 ${operation} on ${where} failed: ${code || status} ${detail}`, undefined, { cause: err });
}

/** True when an error answer is a web page rather than S3's XML error (a web server or a proxy, not the S3 API). */
export function isWebPage(err: unknown): boolean {
  const e = err as AwsError;
  const type = e?.$response?.headers?.['content-type'] ?? '';
  return /html/i.test(type) || /^\s*<(!doctype html|html)/i.test(e?.message ?? '');
}

export function notAListing(request: unknown, bytes: Buffer, status?: number): NotAListingError {
  const r = request as { protocol?: string; hostname?: string; port?: number; path?: string };
  const endpoint = `${r.protocol ?? 'https:'}//${r.hostname ?? '?'}${r.port ? `:${r.port}` : ''}${r.path ?? ''}`;
  const start = JSON.stringify(bytes.subarray(0, 60).toString('utf8'));
  const what = status === undefined ? 'something' : `status ${status} and a page`;
  return new NotAListingError(
    `The endpoint ${endpoint} answered ListObjectsV2 with ${what} that is not an S3 listing (it starts ${start}); nothing was written`,
    'Check --endpoint (and --force-path-style): it must be the S3 API itself, not a web console or a proxy page',
  );
}
