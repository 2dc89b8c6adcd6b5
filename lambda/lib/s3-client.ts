/** Building the S3 client the store uses: swamp's settings, retries, timeouts that name the endpoint. */
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { type S3Settings, checkRegion } from './config';

/** How long a request may wait for an answer's headers before it fails (and is retried). */
export const REQUEST_TIMEOUT_MS = 30_000;

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
      connectionTimeout: 5_000,
      requestTimeout: requestTimeoutMs,
      throwOnRequestTimeout: true,
      httpAgent: { maxSockets: 64 },
      httpsAgent: { maxSockets: 64 },
    },
    ...overrides,
  });
  const where = settings.endpoint ?? 'S3';
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
