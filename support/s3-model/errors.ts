/**
 * S3 errors as the model raises them. Codes, statuses and messages follow
 * S3 (and moto, which the tests compare against), because clients branch on
 * the code and the status, e.g. NoSuchKey vs. PreconditionFailed.
 */

export class S3Error extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Extra elements of the XML error, in order (Key, BucketName, Condition, ...). */
    readonly fields: ReadonlyArray<readonly [string, string]> = [],
  ) {
    super(message);
  }
}

export const noSuchBucket = (bucket: string): S3Error =>
  new S3Error(404, 'NoSuchBucket', 'The specified bucket does not exist', [['BucketName', bucket]]);

/** GetObject names the key; a conditional PUT or DELETE on a missing key does not (S3 and moto alike). */
export const noSuchKey = (key?: string): S3Error =>
  new S3Error(404, 'NoSuchKey', 'The specified key does not exist.', key === undefined ? [] : [['Key', key]]);

export const preconditionFailed = (condition: 'If-Match' | 'If-None-Match'): S3Error =>
  new S3Error(412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', [['Condition', condition]]);

export const invalidArgument = (message: string, name: string, value: string): S3Error =>
  new S3Error(400, 'InvalidArgument', message, [
    ['ArgumentName', name],
    ['ArgumentValue', value],
  ]);

export const invalidBucketName = (): S3Error => new S3Error(400, 'InvalidBucketName', 'The specified bucket is not valid.');

/** `algorithm` is CRC32, SHA256, ... or null for Content-MD5, whose message S3 words differently. */
export const badDigest = (algorithm: string | null): S3Error =>
  new S3Error(
    400,
    'BadDigest',
    algorithm === null
      ? 'The Content-MD5 you specified did not match what we received.'
      : `The ${algorithm} you specified did not match the calculated checksum.`,
  );

export const incompleteBody = (message: string): S3Error => new S3Error(400, 'IncompleteBody', message);

export const invalidRange = (range: string, size: number): S3Error =>
  new S3Error(416, 'InvalidRange', 'The requested range is not satisfiable', [
    ['RangeRequested', range],
    ['ActualObjectSize', String(size)],
  ]);

/** Anything outside the modelled subset fails loudly rather than answering something plausible. */
export const notImplemented = (what: string): S3Error => new S3Error(501, 'NotImplemented', `The S3 model does not implement ${what}.`);
