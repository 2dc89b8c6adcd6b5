/** Error names: each class carries a literal `name`, so a minified bundle still logs `LockBusyError`, not `Zn`. */
import * as lib from '../../lambda/lib/errors';
import { translateError } from '../../lambda/lib/s3-errors';
import { UnknownTriggerError } from '../../lambda/handler/triggers';

const errorClasses = [...(Object.values(lib) as unknown[]), UnknownTriggerError].filter(
  (value): value is new (...args: unknown[]) => lib.IndexerError => typeof value === 'function' && value.prototype instanceof Error,
);

describe('error names', () => {
  it('finds the typed errors', () => {
    expect(errorClasses.map((c) => c.name)).toEqual(
      expect.arrayContaining(['IndexerError', 'LockBusyError', 'UnexpectedError', 'UnknownTriggerError']),
    );
  });

  it.each(errorClasses.map((c) => [c.name, c] as const))('%s names itself with a literal of its own', (name, ErrorClass) => {
    const error = new ErrorClass('key', 'holder', { name: 'TypeError', message: 'm' });
    expect(error.name).toBe(name);
    expect(String(error)).toMatch(new RegExp(`^${name}: `));
  });
});

describe('translateError', () => {
  // DNS fails for the host of a region S3 does not serve; no test may send that lookup, so the SDK's error is built here.
  const notFound = (host: string) =>
    Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', errno: -3008, syscall: 'getaddrinfo', hostname: host });

  it('names --region when the S3 host of a region does not resolve', () => {
    const error = translateError(notFound('my-bucket.s3.mars-north-7.amazonaws.com'), 'ListBucket', 'my-bucket', 'swamp/');
    expect(error).toBeInstanceOf(lib.S3UnavailableError);
    expect((error as lib.IndexerError).hint).toMatch(/^Check --region \(or "region" in the datastore config\): "mars-north-7" may not be/);
  });

  it('leaves the endpoint and network to check when another host does not resolve', () => {
    const error = translateError(notFound('minio.internal'), 'ListBucket', 'b', 'swamp/');
    expect((error as lib.IndexerError).hint).toBe('Check the endpoint and network, then retry');
  });
});
