/**
 * Base class of every error the indexer raises on purpose; `hint` says what the user can do.
 *
 * Each class names itself with a literal `name` (not `new.target.name`): a minified bundle renames
 * classes, and logs and a Lambda's `errorType` must still say `LockBusyError`, not `Zn`.
 */
export class IndexerError extends Error {
  override name = 'IndexerError';

  constructor(
    message: string,
    readonly hint?: string,
    options?: { cause?: unknown },
  ) {
    super(hint ? `${message}. ${hint}` : message, options);
  }
}

/** The datastore configuration is incomplete or malformed. */
export class ConfigError extends IndexerError {
  override name = 'ConfigError';
}

/** S3 refused our credentials, or none were found. */
export class CredentialsError extends IndexerError {
  override name = 'CredentialsError';
}

/** The bucket does not exist (or is in another account/region). */
export class BucketNotFoundError extends IndexerError {
  override name = 'BucketNotFoundError';
}

/** S3 denied an operation the indexer needs. */
export class AccessDeniedError extends IndexerError {
  override name = 'AccessDeniedError';
}

/** S3 kept failing (throttling, 5xx, timeouts, no connection) after every retry. */
export class S3UnavailableError extends IndexerError {
  override name = 'S3UnavailableError';
}

/** The datastore lock is held by a live writer and did not come free in time. */
export class LockBusyError extends IndexerError {
  override name = 'LockBusyError';

  constructor(
    readonly lockKey: string,
    readonly holder: string,
    waitedMs: number,
  ) {
    super(
      `The datastore lock ${lockKey} is held by ${holder} and was still held after ${Math.round(waitedMs / 1000)} s`,
      'Another writer is busy; try again shortly, or delete the lock if that writer is known to be dead',
    );
  }
}

/** A lock was taken while its program was releasing its locks to exit (`releaseHeldLocks`): it was given back at once. */
export class LockReleasedError extends IndexerError {
  override name = 'LockReleasedError';

  constructor(readonly lockKey: string) {
    super(`The datastore lock ${lockKey} was released: the process is exiting`, 'Nothing was written under it; run the command again');
  }
}

/** The index kept changing under us: every conditional write lost its race. */
export class PublishConflictError extends IndexerError {
  override name = 'PublishConflictError';
}

/** A repair was asked of a prefix that holds no object at all: most likely a typo, so nothing is created there. */
export class EmptyDatastoreError extends IndexerError {
  override name = 'EmptyDatastoreError';
}

/**
 * A root or scope whose index must be held whole (monolith, dual-write) would not fit in the memory the
 * process has: the heal stopped before memory ran out, and wrote nothing.
 */
export class IndexTooLargeError extends IndexerError {
  override name = 'IndexTooLargeError';

  constructor(
    /** The root or scope, as `describeScope` says it. */
    readonly scope: string,
    /** Objects listed (or entries held) when the heal stopped. */
    readonly objects: number,
    /** The memory the heal had, as said to the user: "1024 MiB of function memory". */
    readonly memory: string,
    /** The size of the index that was not read, when that is what stopped it (an event's delta reads no listing). */
    readonly indexBytes?: number,
    /** The shard partition too large to hold, when a heal by partitions stopped at it. */
    readonly partition?: string,
  ) {
    super(
      partition !== undefined
        ? `${scope} is too large to heal in ${memory}: its partition ${partition} holds ${objects} objects or more; ` +
            'the partitions committed before it stay healed, and nothing of it was written'
        : indexBytes === undefined
          ? `${scope} is too large to heal in ${memory}: stopped at ${objects} objects, before memory ran out; nothing was written`
          : `${scope} is too large to heal in ${memory}: stopped before reading its ${indexBytes}-byte index; nothing was written`,
      "Raise the DatastoreIndexer construct's memorySize prop (the Lambda), or give Node more heap, e.g. NODE_OPTIONS=--max-old-space-size=4096 (the command)",
    );
  }
}

/**
 * A write was asked of a scope whose live index is held (`LiveIndex.hold`: what it is, or which version,
 * is not known for sure): refused, nothing written. Publishing reports a held scope instead of writing it.
 */
export class HeldScopeError extends IndexerError {
  override name = 'HeldScopeError';

  constructor(
    /** The root or scope, as `describeScope` says it. */
    readonly scope: string,
    /** Why it is held. */
    readonly reason: string,
  ) {
    super(
      `Refusing to write the index of ${scope}: it is held (${reason}); nothing was written`,
      'Run check to see what holds it and resolve that first; if check reports nothing held, report this as a bug',
    );
  }
}

/** An answer to ListObjectsV2 that is not an S3 listing (a web page, a proxy's error page). */
export class NotAListingError extends IndexerError {
  override name = 'NotAListingError';
}

/**
 * An object S3 keeps in an archive storage class (Glacier Flexible Retrieval, Deep Archive, an archive tier
 * of Intelligent-Tiering): it is listed, but no GET reads it until a restore ends. Not a permission problem.
 */
export class ArchivedObjectError extends IndexerError {
  override name = 'ArchivedObjectError';

  constructor(
    readonly bucket: string,
    readonly key: string,
    /** The storage class S3 named, when it did. */
    readonly storageClass: string | undefined,
    /** A restore was asked for and has not ended yet. */
    readonly restoring: boolean,
    options?: { cause?: unknown },
  ) {
    super(
      `s3://${bucket}/${key} is archived${storageClass ? ` (${storageClass})` : ''}${restoring ? ' and its restore is under way' : ''}: S3 serves it only once restored`,
      restoring ? 'Run again once the restore has ended' : `Restore it: ${ArchivedObjectError.restoreCommand(bucket, key)}, then run again`,
      options,
    );
  }

  /** The AWS CLI command that asks S3 to restore an archived object for a week (standard retrieval). */
  static restoreCommand(bucket: string, key: string): string {
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    return `aws s3api restore-object --bucket ${bucket} --key ${quote(key)} --restore-request '{"Days":7}'`;
  }
}

/** A key from S3 or the index would resolve outside the cache folder. */
export class UnsafeKeyError extends IndexerError {
  override name = 'UnsafeKeyError';

  constructor(readonly key: string) {
    super(`Refusing key ${JSON.stringify(key)}: it would be written outside the cache folder`);
  }
}

/** The local cache folder cannot be used: empty, not writable, its control folder unusable, or a link or file in the way. */
export class CacheError extends IndexerError {
  override name = 'CacheError';
}

/** An indexed object could not be downloaded whole: gone since the index was read, or its body not the size S3 announced. */
export class DownloadError extends IndexerError {
  override name = 'DownloadError';
}

/**
 * Something failed that is neither S3 answering nor a known condition (a `TypeError`, a bug): reported as
 * what it is, with the original error's name and message, never as an outage to wait out.
 */
export class UnexpectedError extends IndexerError {
  override name = 'UnexpectedError';

  constructor(
    readonly operation: string,
    readonly original: { readonly name: string; readonly message: string },
    options?: { cause?: unknown },
  ) {
    super(
      `Unexpected ${original.name} during ${operation}: ${original.message}`,
      'This is not an S3 outage; rerun with DATASTORE_INDEXER_DEBUG=1 for the stack and report it if it persists',
      options,
    );
  }
}

/** The store answered a conditional request with "not implemented": fall back to the lock alone. */
export class ConditionalWritesUnsupportedError extends IndexerError {
  override name = 'ConditionalWritesUnsupportedError';
}
