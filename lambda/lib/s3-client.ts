/** Building the S3 client the store uses: swamp's settings, retries, timeouts that name the endpoint. */
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { type S3Settings, checkRegion } from './config';
import { allowDirect } from './s3-direct';
import { HttpPool } from './s3-http';

/** How long a request may wait for an answer's headers before it fails (and is retried). */
export const REQUEST_TIMEOUT_MS = 30_000;

/** How long a connection may take to open. */
const CONNECTION_TIMEOUT_MS = 5_000;

/** Connections per client: no fewer than the most the library sends at once by default (`DEFAULT_HYDRATE_CONCURRENCY`), so no default queues for a socket. */
const MAX_SOCKETS = 256;

/**
 * Builds an S3 client from swamp's settings; the SDK's adaptive retries absorb throttling, 5xx and timeouts.
 * A request that gets no answer within `requestTimeoutMs` fails (the SDK only warns unless told to throw),
 * and the final error names the endpoint that kept silent.
 */
export function createS3Client(
  settings: S3Settings,
  overrides: Partial<S3ClientConfig> = {},
  requestTimeoutMs = REQUEST_TIMEOUT_MS,
): S3Client {
  const region = settings.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
  const source = settings.region !== undefined ? 'The region' : process.env.AWS_REGION !== undefined ? 'AWS_REGION' : 'AWS_DEFAULT_REGION';
  checkRegion(region, source);
  // The SDK's kept-alive connections; the direct path (`s3-direct.ts`) keeps its own, as many at most.
  const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: MAX_SOCKETS });
  const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: MAX_SOCKETS });
  const client = new S3Client({
    region,
    endpoint: settings.endpoint,
    forcePathStyle: settings.forcePathStyle,
    maxAttempts: 6,
    retryMode: 'adaptive',
    // S3-compatible stores vary in checksum support; S3 itself needs none for these small requests.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: {
      connectionTimeout: CONNECTION_TIMEOUT_MS,
      requestTimeout: requestTimeoutMs,
      throwOnRequestTimeout: true,
      httpAgent,
      httpsAgent,
    },
    ...overrides,
  });
  const where = settings.endpoint ?? 'S3';
  let pool: HttpPool | undefined;
  // A caller's own transport (a test's fault injector) must see every request: then the SDK sends them all.
  if (overrides.requestHandler === undefined) {
    pool = new HttpPool({ maxSockets: MAX_SOCKETS, connectionTimeoutMs: CONNECTION_TIMEOUT_MS, requestTimeoutMs, where });
    allowDirect(client, { pool, expectedBucketOwner: settings.expectedBucketOwner });
  }
  const owner = settings.expectedBucketOwner;
  if (owner !== undefined) {
    // Every bucket and object operation the store sends takes ExpectedBucketOwner: a bucket of another account answers 403.
    client.middlewareStack.add(
      (next) => async (args) => {
        const input = args.input as { ExpectedBucketOwner?: string };
        input.ExpectedBucketOwner ??= owner;
        return next(args);
      },
      { step: 'initialize', name: 'datastoreIndexerExpectedBucketOwner', override: true },
    );
  }
  const destroy = client.destroy.bind(client);
  client.destroy = () => {
    destroy();
    httpAgent.destroy();
    httpsAgent.destroy();
    pool?.destroy();
  };
  client.middlewareStack.add(
    (next) => async (args) => {
      try {
        return await next(args);
      } catch (err) {
        const e = err as { name?: string; message?: string };
        if (e?.name === 'TimeoutError' && typeof e.message === 'string' && !e.message.includes(where)) {
          e.message = `no answer from ${where} within ${requestTimeoutMs} ms (${e.message})`;
        }
        throw err;
      }
    },
    { step: 'initialize', name: 'datastoreIndexerTimeoutEndpoint', override: true },
  );
  return client;
}
