/** Base class of every error the indexer raises on purpose; `hint` says what the user can do. */
export class IndexerError extends Error {
  constructor(
    message: string,
    readonly hint?: string,
    options?: { cause?: unknown },
  ) {
    super(hint ? `${message}. ${hint}` : message, options);
    this.name = new.target.name;
  }
}

/** The datastore configuration is incomplete or malformed. */
export class ConfigError extends IndexerError {}

/** S3 refused our credentials, or none were found. */
export class CredentialsError extends IndexerError {}

/** The bucket does not exist (or is in another account/region). */
export class BucketNotFoundError extends IndexerError {}

/** S3 denied an operation the indexer needs. */
export class AccessDeniedError extends IndexerError {}

/** S3 kept failing (throttling, 5xx, timeouts) after every retry. */
export class S3UnavailableError extends IndexerError {}

/** The datastore lock is held by a live writer and did not come free in time. */
export class LockBusyError extends IndexerError {
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

/** The index kept changing under us: every conditional write lost its race. */
export class PublishConflictError extends IndexerError {}

/** A key from S3 or the index would resolve outside the cache folder. */
export class UnsafeKeyError extends IndexerError {
  constructor(readonly key: string) {
    super(`Refusing key ${JSON.stringify(key)}: it would be written outside the cache folder`);
  }
}
